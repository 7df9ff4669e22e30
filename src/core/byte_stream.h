// Fixed-width fields written to and read back from a byte buffer, for the
// binary formats kiln defines itself (KV transfer messages, the compiled
// tokenizer). The reader checks every length against what is left, so a
// truncated or corrupt buffer is an error, never a read past its end.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace kiln {

class ByteWriter {
 public:
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void PutBytes(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
  }
  // A uint32 length, then the bytes.
  void PutString(std::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    PutBytes(s.data(), s.size());
  }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  // `what` names the buffer in errors ("KV block", "compiled tokenizer").
  ByteReader(std::span<const uint8_t> bytes, const char* what) : bytes_(bytes), what_(what) {}

  template <typename T>
  Expected<T> Get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value{};  // initialized: GCC cannot see that GetBytes fills it or returns an error
    KILN_RETURN_IF_ERROR(GetBytes(&value, sizeof(T)));
    return value;
  }
  Status GetBytes(void* out, size_t size) {
    if (size == 0) return Status::Ok();  // `out` may be an empty vector's null data()
    if (bytes_.size() - pos_ < size) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: ends after {} bytes", what_, bytes_.size()));
    }
    std::memcpy(out, bytes_.data() + pos_, size);
    pos_ += size;
    return Status::Ok();
  }
  // A string PutString wrote, refused when longer than `max_bytes`.
  Status GetString(std::string* out, uint32_t max_bytes) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Get<uint32_t>());
    if (n > max_bytes) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: a string of {} bytes at offset {} (at most {})", what_, n, pos_ - 4, max_bytes));
    }
    if (bytes_.size() - pos_ < n) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: ends after {} bytes", what_, bytes_.size()));
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return Status::Ok();
  }
  // A count that is refused when above `max`, or when even `min_bytes_each`
  // bytes per item would not fit in what is left: a corrupt count is caught
  // before anything is allocated for it.
  Expected<uint32_t> GetCount(uint32_t max, size_t min_bytes_each, const char* of) {
    KILN_ASSIGN_OR_RETURN(uint32_t n, Get<uint32_t>());
    if (n > max || (min_bytes_each > 0 && n > (bytes_.size() - pos_) / min_bytes_each)) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: {} {} do not fit", what_, n, of));
    }
    return n;
  }
  size_t position() const { return pos_; }
  const char* what() const { return what_; }
  Status End() const {
    if (pos_ != bytes_.size()) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: {} bytes left over after the message", what_, bytes_.size() - pos_));
    }
    return Status::Ok();
  }

 private:
  std::span<const uint8_t> bytes_;
  const char* what_;
  size_t pos_ = 0;
};

}  // namespace kiln
