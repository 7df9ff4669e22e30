// QDQ convolutions and matrix products on integer kernels. A quantized ONNX
// model writes an int8 convolution as
//   Conv(DequantizeLinear(x_q, sx, zx), DequantizeLinear(W_q, sw, zw), b)
// with W_q a constant and b a constant or DequantizeLinear(int32 constant).
// Run as written, that is an fp32 convolution over dequantized values, whose
// summation order decides on which side of the next quantization step an
// activation lands. This pass rewrites it as
//   y = Cast<f32>(ConvInteger(x_q, W_q, zx, zw)) * (sx * sw[oc]) + b
// whose int32 accumulation is exact; y keeps its fp32 type, so the
// QuantizeLinear that usually follows sees the value real arithmetic gives
// up to one rounding of the scale product.
// Only when sx, zx, sw, zw and b are compile-time constants, sw is per
// tensor or per output channel (axis 0), and sx per tensor. Runs before
// constant folding would turn the weights' DequantizeLinear into fp32.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

Status FuseQdqProducts(Graph& g, std::vector<std::string>* log);

}  // namespace kiln
