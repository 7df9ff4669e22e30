// An 8-bit RGB image in memory: what the image decoders produce, what the
// vision pipelines preprocess, and what the drawing writes on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {

struct Image {
  int width = 0;
  int height = 0;
  // Row-major, 3 bytes per pixel in R, G, B order, no row padding.
  std::vector<uint8_t> rgb;

  Image() = default;
  Image(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * static_cast<size_t>(h) * 3) {}

  bool empty() const { return width <= 0 || height <= 0; }
  uint8_t* pixel(int x, int y) { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
  const uint8_t* pixel(int x, int y) const { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
};

}  // namespace kiln
