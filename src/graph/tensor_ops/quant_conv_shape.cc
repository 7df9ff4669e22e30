// Convolution geometry for the quantized convolutions.
#include "graph/tensor_ops/quant_conv_shape.h"

#include <algorithm>
#include <string>

#include "graph/tensor_ops/matmul_shape.h"
#include "graph/tensor_type.h"

namespace kiln {

std::vector<int64_t> QConvGeometry::OutputDims() const {
  std::vector<int64_t> dims = {batch, out_channels};
  dims.insert(dims.end(), out.begin(), out.end());
  return dims;
}

Expected<QConvGeometry> QConvGeometryOf(std::string_view op, std::string_view node, const AttributeMap& attrs,
                                        const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
  if (x.size() < 3 || w.size() != x.size()) {
    return InvalidArgument(
        "{} {}: input [{}] and weight [{}] must be [N, C, spatial...] and [M, C/group, kernel...]", op, node,
        DimsToString(x), DimsToString(w));
  }
  const size_t sd = x.size() - 2;
  QConvGeometry g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  KILN_ASSIGN_OR_RETURN(g.group, CheckedIntAttrOr(attrs, "group", 1));
  if (g.group < 1 || g.in_channels % g.group != 0 || g.out_channels % g.group != 0 ||
      w[1] * g.group != g.in_channels) {
    return InvalidArgument("{} {}: input channels {} != weight's {} x group {}", op, node, g.in_channels,
                           w[1], g.group);
  }
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  if (attrs.Has("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ks, attrs.Ints("kernel_shape"));
    if (ks != g.kernel) {
      return InvalidArgument("{} {}: kernel_shape [{}] disagrees with the weight [{}]", op, node,
                             DimsToString(ks), DimsToString(w));
    }
  }
  g.strides.assign(sd, 1);
  g.dilations.assign(sd, 1);
  std::vector<int64_t> pads(2 * sd, 0);
  if (attrs.Has("strides")) {
    KILN_ASSIGN_OR_RETURN(g.strides, attrs.Ints("strides"));
  }
  if (attrs.Has("dilations")) {
    KILN_ASSIGN_OR_RETURN(g.dilations, attrs.Ints("dilations"));
  }
  if (attrs.Has("pads")) {
    KILN_ASSIGN_OR_RETURN(pads, attrs.Ints("pads"));
  }
  if (g.strides.size() != sd || g.dilations.size() != sd || pads.size() != 2 * sd) {
    return InvalidArgument("{} {}: strides, dilations and pads must have {}, {} and {} values", op, node, sd,
                           sd, 2 * sd);
  }
  std::string auto_pad = "NOTSET";
  if (attrs.Has("auto_pad")) {
    KILN_ASSIGN_OR_RETURN(auto_pad, attrs.String("auto_pad"));
  }
  g.pad_begin.assign(sd, 0);
  g.out.assign(sd, 0);
  for (size_t i = 0; i < sd; ++i) {
    if (g.strides[i] < 1 || g.dilations[i] < 1 || pads[i] < 0 || pads[i + sd] < 0) {
      return InvalidArgument("{} {}: strides and dilations must be positive and pads not negative", op, node);
    }
    const int64_t extent = g.dilations[i] * (g.kernel[i] - 1) + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[i] = (g.in[i] + g.strides[i] - 1) / g.strides[i];
      const int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * g.strides[i] + extent - g.in[i]);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "VALID" || auto_pad == "NOTSET") {
      const int64_t pb = auto_pad == "VALID" ? 0 : pads[i], pe = auto_pad == "VALID" ? 0 : pads[i + sd];
      g.pad_begin[i] = pb;
      const int64_t span = g.in[i] + pb + pe - extent;
      if (span < 0) {
        return InvalidArgument("{} {}: kernel extent {} exceeds the padded input {} on spatial axis {}", op,
                               node, extent, g.in[i] + pb + pe, i);
      }
      g.out[i] = span / g.strides[i] + 1;
    } else {
      return InvalidArgument("{} {}: auto_pad '{}' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", op, node,
                             auto_pad);
    }
  }
  return g;
}

}  // namespace kiln
