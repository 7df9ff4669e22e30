#include "vision/exif_orientation.h"

#include <algorithm>
#include <cstring>

namespace kiln {

int ExifOrientation(const uint8_t* app1, size_t size) {
  if (size < 14 || std::memcmp(app1, "Exif\0\0", 6) != 0) return 1;
  const uint8_t* tiff = app1 + 6;
  const size_t n = size - 6;
  bool little;
  if (tiff[0] == 'I' && tiff[1] == 'I') {
    little = true;
  } else if (tiff[0] == 'M' && tiff[1] == 'M') {
    little = false;
  } else {
    return 1;
  }
  auto u16 = [&](size_t at) -> uint32_t {
    return little ? tiff[at] | (tiff[at + 1] << 8) : (tiff[at] << 8) | tiff[at + 1];
  };
  auto u32 = [&](size_t at) -> uint32_t { return little ? u16(at) | (u16(at + 2) << 16) : (u16(at) << 16) | u16(at + 2); };
  if (u16(2) != 42) return 1;
  const size_t ifd = u32(4);
  if (ifd > n || n - ifd < 2) return 1;
  const size_t entries = u16(ifd);
  for (size_t i = 0; i < entries; ++i) {
    const size_t e = ifd + 2 + i * 12;
    if (e > n || n - e < 12) return 1;
    if (u16(e) == 0x0112) {  // Orientation, a SHORT
      const uint32_t v = u16(e + 8);
      return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
    }
  }
  return 1;
}

Image ApplyExifOrientation(const Image& image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int w = image.width, h = image.height;
  const bool swaps = orientation >= 5;  // 5..8 turn the image by a quarter
  Image out(swaps ? h : w, swaps ? w : h);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                  // mirrored
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;  // upside down
        case 4: sy = h - 1 - y; break;                  // mirrored vertically
        case 5: sx = y, sy = x; break;                  // transposed
        case 6: sx = y, sy = h - 1 - x; break;          // to be turned clockwise
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;  // transversed
        case 8: sx = w - 1 - y, sy = x; break;          // to be turned counterclockwise
      }
      std::copy_n(image.pixel(sx, sy), 3, out.pixel(x, y));
    }
  }
  return out;
}

}  // namespace kiln
