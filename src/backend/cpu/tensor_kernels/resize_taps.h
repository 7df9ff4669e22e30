// Where each output point of a resized axis reads from: its source
// indices and weights along that axis (1 tap for nearest, 2 for linear, 4
// for cubic), as ONNX Resize's coordinate transformation, rounding and
// interpolation say.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/tensor_ops/shape_op_params.h"

namespace kiln::cpu::shape_kernels {

struct AxisTaps {
  int64_t per_point = 1;
  std::vector<int64_t> index;  // per_point per output point, clamped into [0, in_len)
  std::vector<float> weight;   // the same layout
  std::vector<bool> outside;   // per output point: outside the crop (tf_crop_and_resize)
  bool any_outside = false;
  bool identity = false;  // output point i reads input point i alone
  size_t count() const { return index.size() / static_cast<size_t>(per_point); }
};

AxisTaps MakeAxisTaps(const shape_ops::ResizeParams& p, size_t axis);

// The cubic convolution weights of the four taps around a point at
// fraction t past its floor (Keys' kernel with parameter a).
void CubicWeights(float a, float t, float w[4]);

}  // namespace kiln::cpu::shape_kernels
