#include "vision/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln {
namespace {

// For each destination coordinate: the first source index and the weight of
// the second (index + 1, or the same index at the edge).
struct Taps {
  std::vector<int> index0, index1;
  std::vector<float> weight1;
};

Taps ComputeTaps(int src, int dst) {
  Taps t;
  t.index0.resize(dst);
  t.index1.resize(dst);
  t.weight1.resize(dst);
  const double scale = static_cast<double>(src) / dst;
  for (int i = 0; i < dst; ++i) {
    double f = (i + 0.5) * scale - 0.5;
    int i0 = static_cast<int>(std::floor(f));
    double w = f - i0;
    if (i0 < 0) {
      i0 = 0;
      w = 0;
    }
    if (i0 >= src - 1) {
      i0 = src - 1;
      w = 0;
    }
    t.index0[i] = i0;
    t.index1[i] = std::min(i0 + 1, src - 1);
    t.weight1[i] = static_cast<float>(w);
  }
  return t;
}

}  // namespace

Image ResizeBilinear(const Image& src, int width, int height) {
  Image dst(width, height);
  const Taps xs = ComputeTaps(src.width, width);
  const Taps ys = ComputeTaps(src.height, height);
  for (int y = 0; y < height; ++y) {
    const uint8_t* row0 = src.pixel(0, ys.index0[y]);
    const uint8_t* row1 = src.pixel(0, ys.index1[y]);
    const float wy = ys.weight1[y];
    uint8_t* out = dst.pixel(0, y);
    for (int x = 0; x < width; ++x) {
      const int a = xs.index0[x] * 3, b = xs.index1[x] * 3;
      const float wx = xs.weight1[x];
      for (int c = 0; c < 3; ++c) {
        const float top = row0[a + c] + (row0[b + c] - row0[a + c]) * wx;
        const float bottom = row1[a + c] + (row1[b + c] - row1[a + c]) * wx;
        const float v = top + (bottom - top) * wy;
        out[x * 3 + c] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return dst;
}

}  // namespace kiln
