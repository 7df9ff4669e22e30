// Builds file images byte by byte for the format tests, so that broken files
// (wrong lengths, counts, offsets) can be written exactly as intended.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::testing {

class ByteImage {
 public:
  template <typename T>
  ByteImage& Put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.insert(bytes_.end(), b, b + sizeof(T));
    return *this;
  }
  ByteImage& U8(uint8_t v) { return Put(v); }
  ByteImage& U32(uint32_t v) { return Put(v); }
  ByteImage& U64(uint64_t v) { return Put(v); }
  ByteImage& Raw(const std::string& s) {
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  ByteImage& Raw(const std::vector<uint8_t>& b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  // A GGUF string: u64 length, then the bytes.
  ByteImage& Str(const std::string& s) { return U64(s.size()).Raw(s); }
  // Zero bytes up to the next multiple of `alignment`.
  ByteImage& Align(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  ByteImage& Zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }

  size_t size() const { return bytes_.size(); }
  const uint8_t* data() const { return bytes_.data(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// One tensor of a safetensors file: its dtype name as the format spells it.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A well-formed safetensors image of `entries`, data back to back in order.
inline std::vector<uint8_t> SafetensorsImage(const std::vector<SafetensorsEntry>& entries) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::vector<uint8_t> data;
  for (const auto& e : entries) {
    header += fmt::format(",\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", e.name,
                          e.dtype, fmt::join(e.shape, ","), data.size(), data.size() + e.bytes.size());
    data.insert(data.end(), e.bytes.begin(), e.bytes.end());
  }
  header += "}";
  ByteImage image;
  image.U64(header.size()).Raw(header).Raw(data);
  return image.bytes();
}

inline void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  WriteFile(path, std::vector<uint8_t>(text.begin(), text.end()));
}

}  // namespace kiln::testing
