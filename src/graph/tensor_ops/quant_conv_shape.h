// The output geometry of the quantized convolutions (ConvInteger,
// QLinearConv): ONNX's Conv attributes (auto_pad, pads, strides,
// dilations, group, kernel_shape) resolved against the input and weight
// shapes, shared by shape inference and the kernels.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/attribute_map.h"

namespace kiln {

struct QConvGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  std::vector<int64_t> in, kernel, out;  // spatial sizes
  std::vector<int64_t> strides, dilations, pad_begin;
  std::vector<int64_t> OutputDims() const;
};

// x is [N, C, spatial...], w is [M, C / group, kernel...]. Errors name the op and node.
Expected<QConvGeometry> QConvGeometryOf(std::string_view op, std::string_view node, const AttributeMap& attrs,
                                        const std::vector<int64_t>& x, const std::vector<int64_t>& w);

}  // namespace kiln
