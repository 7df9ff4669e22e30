#include "vision/letterbox.h"

#include <algorithm>
#include <cmath>

#include "vision/image_resize.h"

namespace kiln {
namespace {

// Python's round(): halves to even (std::nearbyint in the default rounding
// mode), so that sizes agree with Ultralytics' to the pixel.
int RoundHalfEven(double v) { return static_cast<int>(std::nearbyint(v)); }

}  // namespace

LetterboxGeometry ComputeLetterbox(int source_width, int source_height, int target_width, int target_height) {
  LetterboxGeometry g;
  g.source_width = source_width;
  g.source_height = source_height;
  g.target_width = target_width;
  g.target_height = target_height;
  const double r = std::min(static_cast<double>(target_height) / source_height,
                            static_cast<double>(target_width) / source_width);
  g.scale = static_cast<float>(r);
  g.resized_width = std::clamp(RoundHalfEven(source_width * r), 1, target_width);
  g.resized_height = std::clamp(RoundHalfEven(source_height * r), 1, target_height);
  const double dw = (target_width - g.resized_width) / 2.0;
  const double dh = (target_height - g.resized_height) / 2.0;
  g.pad_left = RoundHalfEven(dw - 0.1);
  g.pad_top = RoundHalfEven(dh - 0.1);
  return g;
}

Image LetterboxImage(const Image& image, const LetterboxGeometry& g) {
  Image out(g.target_width, g.target_height);
  std::fill(out.rgb.begin(), out.rgb.end(), static_cast<uint8_t>(kLetterboxPadValue));
  const bool same = g.resized_width == image.width && g.resized_height == image.height;
  const Image resized = same ? Image() : ResizeBilinear(image, g.resized_width, g.resized_height);
  const Image& src = same ? image : resized;
  for (int y = 0; y < g.resized_height; ++y) {
    std::copy_n(src.pixel(0, y), static_cast<size_t>(g.resized_width) * 3, out.pixel(g.pad_left, g.pad_top + y));
  }
  return out;
}

HostTensor LetterboxTensor(const Image& image, const LetterboxGeometry& g) {
  const Image boxed = LetterboxImage(image, g);
  const int64_t h = g.target_height, w = g.target_width;
  HostTensor t(TensorType{DType::kF32, {1, 3, h, w}});
  float* out = t.data<float>();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const uint8_t* p = boxed.pixel(static_cast<int>(x), static_cast<int>(y));
      for (int c = 0; c < 3; ++c) out[(c * h + y) * w + x] = p[c] / 255.0f;
    }
  }
  return t;
}

void MapBoxToSource(const LetterboxGeometry& g, float box[4]) {
  for (int i = 0; i < 4; ++i) {
    const bool is_x = i % 2 == 0;
    float v = (box[i] - (is_x ? g.pad_left : g.pad_top)) / g.scale;
    box[i] = std::clamp(v, 0.0f, static_cast<float>(is_x ? g.source_width : g.source_height));
  }
}

}  // namespace kiln
