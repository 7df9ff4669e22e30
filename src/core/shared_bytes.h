// Immutable bytes shared by reference: either owned (a string moved in) or
// a view into memory another object keeps alive, such as a section of a
// mapped artifact, so that weights read from a file can be used where they
// lie instead of being copied out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kiln {

class SharedBytes {
 public:
  SharedBytes() = default;
  // Takes `owned`'s bytes.
  explicit SharedBytes(std::string owned) {
    auto s = std::make_shared<const std::string>(std::move(owned));
    size_ = s->size();
    data_ = std::shared_ptr<const uint8_t>(s, reinterpret_cast<const uint8_t*>(s->data()));
  }
  // `size` bytes at `data`, which `keeper` keeps valid: every copy holds it.
  // REQUIRES: keeper is not null.
  SharedBytes(std::shared_ptr<const void> keeper, const uint8_t* data, size_t size)
      : data_(std::move(keeper), data), size_(size) {}

  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Whether bytes were given at all (a default-constructed one holds none).
  bool held() const { return data_ != nullptr; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_.get()), size_}; }
  const uint8_t* begin() const { return data(); }
  const uint8_t* end() const { return data() + size_; }

 private:
  std::shared_ptr<const uint8_t> data_;  // aliases into what its owner keeps alive
  size_t size_ = 0;
};

}  // namespace kiln
