// Fuzzes the JPEG and PNG decoders, then checks what they promise of an
// image they accept: positive dimensions within the pixel limit and exactly
// width x height x 3 bytes.
#include <cstdint>

#include "vision/image_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::ImageDecodeLimits limits;
  limits.max_pixels = 1 << 20;  // a few bytes must not ask for gigabytes
  auto image = kiln::DecodeImage(data, size, limits);
  if (!image.ok()) {
    if (image.status().message().empty()) __builtin_trap();
    return 0;
  }
  if (image->width <= 0 || image->height <= 0) __builtin_trap();
  if (static_cast<int64_t>(image->width) * image->height > limits.max_pixels) __builtin_trap();
  if (image->rgb.size() != static_cast<size_t>(image->width) * image->height * 3) __builtin_trap();
  // Every byte is read (MemorySanitizer-style use of what the decoder wrote).
  unsigned sum = 0;
  for (uint8_t b : image->rgb) sum += b;
  if (sum == 0xffffffffu) __builtin_trap();
  // A decoded image encodes again.
  if (!kiln::EncodePng(*image).ok()) __builtin_trap();
  return 0;
}
