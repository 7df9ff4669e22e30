// The geometry of a convolution or pooling window over N-d images: the
// kernel, strides, dilations, the pads that auto_pad and ceil_mode resolve
// to, and the output size. Shape inference and the backends' kernels both
// take it from here, so they cannot disagree on a pad.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/attribute_map.h"

namespace kiln {

struct WindowGeometry {
  int spatial = 0;  // spatial dimensions: 1 for NCW, 2 for NCHW, ...
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t group = 1;
  std::vector<int64_t> in;      // spatial input size
  std::vector<int64_t> kernel;  // kernel size
  std::vector<int64_t> stride;
  std::vector<int64_t> dilation;
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;
  std::vector<int64_t> out;             // spatial output size
  std::vector<int64_t> output_padding;  // ConvTranspose only

  // The extent of a dilated kernel along axis i.
  int64_t DilatedKernel(int i) const { return (kernel[i] - 1) * dilation[i] + 1; }
  // Product of the spatial output sizes.
  int64_t OutPixels() const;
  int64_t InPixels() const;
  int64_t KernelTaps() const;
  std::vector<int64_t> OutputDims() const;  // {batch, out_channels, out...}
};

// Conv (and kiln.FusedConv): x [N, C, spatial...], w [M, C/group, k...].
// Errors name op and node: channels that do not match the weight times
// group, a kernel larger than the padded input, bad attribute lengths.
Expected<WindowGeometry> ConvGeometry(std::string_view op, std::string_view node, const AttributeMap& attrs,
                                      const std::vector<int64_t>& x, const std::vector<int64_t>& w);

// ConvTranspose: x [N, C, spatial...], w [C, M/group, k...]; output_shape,
// output_padding and auto_pad as ONNX defines them.
Expected<WindowGeometry> ConvTransposeGeometry(std::string_view op, std::string_view node,
                                               const AttributeMap& attrs, const std::vector<int64_t>& x,
                                               const std::vector<int64_t>& w);

// MaxPool, AveragePool, LpPool: kernel_shape from the attributes,
// ceil_mode (the last window must start inside the input or its left pad).
Expected<WindowGeometry> PoolGeometry(std::string_view op, std::string_view node, const AttributeMap& attrs,
                                      const std::vector<int64_t>& x);

// An attribute with a default (for the ints and floats kiln's window ops read).
int64_t IntAttrOr(const AttributeMap& attrs, const char* name, int64_t fallback);
double FloatAttrOr(const AttributeMap& attrs, const char* name, double fallback);

}  // namespace kiln
