// Resize's per-axis taps.
#include "backend/cpu/tensor_kernels/resize_taps.h"

#include <algorithm>
#include <cmath>

namespace kiln::cpu::shape_kernels {

using namespace ::kiln::shape_ops;  // the parameters these kernels share with shape inference
namespace {

int64_t RoundNearest(ResizeNearest mode, float x, bool downsampling) {
  const float f = std::floor(x);
  switch (mode) {
    case ResizeNearest::kRoundPreferFloor: return static_cast<int64_t>(x == f + 0.5f ? f : std::round(x));
    case ResizeNearest::kRoundPreferCeil: return static_cast<int64_t>(x == f + 0.5f ? f + 1 : std::round(x));
    case ResizeNearest::kFloor: return static_cast<int64_t>(f);
    case ResizeNearest::kCeil: return static_cast<int64_t>(std::ceil(x));
    case ResizeNearest::kSimple: return static_cast<int64_t>(downsampling ? std::ceil(x) : std::trunc(x));
  }
  return static_cast<int64_t>(f);
}

}  // namespace

void CubicWeights(float a, float t, float w[4]) {
  const float t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
  w[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
  w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  w[2] = ((a + 2) * t2 - (a + 3)) * t2 * t2 + 1;
  w[3] = ((a * t3 - 5 * a) * t3 + 8 * a) * t3 - 4 * a;
}

AxisTaps MakeAxisTaps(const ResizeParams& p, size_t axis) {
  AxisTaps t;
  const int64_t in_len = p.in_dims[axis];
  const int64_t out_len = p.out_dims[axis];
  const auto last = static_cast<float>(in_len - 1);
  t.per_point = p.mode == ResizeMode::kNearest ? 1 : p.mode == ResizeMode::kLinear ? 2 : 4;
  t.outside.assign(static_cast<size_t>(out_len), false);
  t.identity = in_len == out_len;
  const bool crop = p.coordinates == ResizeCoordinates::kTfCropAndResize;
  for (int64_t x = 0; x < out_len; ++x) {
    const float c = ResizeSourceCoordinate(p, axis, x);
    if (c != static_cast<float>(x)) t.identity = false;
    if (crop && (c < 0 || c > last)) {
      t.outside[static_cast<size_t>(x)] = true;
      t.any_outside = true;
    }
    const auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in_len - 1); };
    switch (p.mode) {
      case ResizeMode::kNearest:
        t.index.push_back(clamp(RoundNearest(p.nearest, c, p.scales[axis] < 1.0f)));
        t.weight.push_back(1.0f);
        break;
      case ResizeMode::kLinear: {
        const float cc = std::clamp(c, 0.0f, last);
        const int64_t i0 = clamp(static_cast<int64_t>(cc));
        const int64_t i1 = std::min(i0 + 1, in_len - 1);
        const float w1 = i0 == i1 ? 0.0f : cc - static_cast<float>(i0);
        t.index.push_back(i0);
        t.index.push_back(i1);
        t.weight.push_back(1.0f - w1);
        t.weight.push_back(w1);
        break;
      }
      case ResizeMode::kCubic: {
        const float f = std::floor(c);
        float w[4];
        CubicWeights(static_cast<float>(p.cubic_a), c - f, w);
        float sum = 0;
        for (int k = 0; k < 4; ++k) {
          const int64_t i = static_cast<int64_t>(f) - 1 + k;
          if (p.exclude_outside && (i < 0 || i >= in_len)) w[k] = 0;
          sum += w[k];
        }
        for (int k = 0; k < 4; ++k) {
          t.index.push_back(clamp(static_cast<int64_t>(f) - 1 + k));
          t.weight.push_back(p.exclude_outside && sum != 0 ? w[k] / sum : w[k]);
        }
        break;
      }
    }
  }
  return t;
}

}  // namespace kiln::cpu::shape_kernels
