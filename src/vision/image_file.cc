// Picking the decoder by signature, and the file-level reads and writes.
#include "vision/image_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/mapped_file.h"

namespace kiln {

Expected<Image> DecodeImage(const uint8_t* data, size_t size, const ImageDecodeLimits& limits) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return DecodePng(data, size, limits);
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return DecodeJpeg(data, size, limits);
  return Unsupported("not a JPEG or PNG image (the first bytes are neither signature)");
}

Expected<Image> ReadImageFile(const std::string& path, const ImageDecodeLimits& limits) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  auto image = DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), limits);
  if (!image.ok()) return image.status().WithContext(path);
  return image;
}

Status WritePngFile(const Image& image, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EncodePng(image));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return IoError("cannot create {}: {}", path, std::strerror(errno));
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) return IoError("cannot write {}: {}", path, std::strerror(errno));
  return Status::Ok();
}

}  // namespace kiln
