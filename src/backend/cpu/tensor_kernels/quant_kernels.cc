// The CPU's quantization kernels: QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear (per tensor and per axis); the quantized products
// (qmatmul_kernels.cc) and convolutions (qconv_kernels.cc) register here.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/tensor_kernels/qmatmul_kernels.h"
#include "backend/cpu/tensor_kernels/quant_values.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_ops/matmul_shape.h"

namespace kiln::cpu {
namespace {

// x viewed as [outer, channels, inner] around the quantization axis
// (channels 1 for per-tensor parameters).
struct AxisSplit {
  int64_t outer = 1, channels = 1, inner = 1;
};

Expected<AxisSplit> SplitFor(const TensorKernelArgs& args) {
  AxisSplit s;
  const auto& dims = args.inputs[0].dims;
  int64_t total = args.inputs[0].ElementCount();
  if (args.inputs[1].ElementCount() == 1 || dims.empty()) {
    s.inner = total;
    return s;
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, IntAttrOr(args.a(), "axis", 1));
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += rank;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) s.outer *= dims[static_cast<size_t>(d)];
    if (d == axis) s.channels = dims[static_cast<size_t>(d)];
    if (d > axis) s.inner *= dims[static_cast<size_t>(d)];
  }
  return s;
}

Expected<TensorKernel> MakeQuantize(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(AxisSplit s, SplitFor(args));
  if (args.inputs[1].dtype != DType::kF32) return Unsupported("y_scale dtype {} (f32 only)", DTypeName(args.inputs[1].dtype));
  const DType x_type = args.inputs[0].dtype, zp_type = args.has(2) ? args.inputs[2].dtype : DType::kU8;
  const DType out = args.outputs[0].dtype;
  const bool per_axis_zp = args.has(2) && args.inputs[2].ElementCount() > 1;
  const bool has_zp = args.has(2);
  TensorKernel k;
  k.impl = "reference";
  k.run = [s, x_type, zp_type, out, per_axis_zp, has_zp](const TensorCall& call) {
    const float* scale = static_cast<const float*>(call.inputs[1]);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t c = 0; c < s.channels; ++c) {
        const float sc = scale[s.channels > 1 ? c : 0];
        const int32_t zp = ReadInt(zp_type, has_zp ? call.inputs[2] : nullptr, per_axis_zp ? c : 0);
        const int64_t base = (o * s.channels + c) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          const float x = x_type == DType::kF32 ? static_cast<const float*>(call.inputs[0])[base + i]
                                                : static_cast<float>(static_cast<const int32_t*>(call.inputs[0])[base + i]);
          StoreInt8(out, call.outputs[0], base + i, SaturateRound(x / sc, zp, out));
        }
      }
    }
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeDequantize(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(AxisSplit s, SplitFor(args));
  if (args.inputs[1].dtype != DType::kF32) return Unsupported("x_scale dtype {} (f32 only)", DTypeName(args.inputs[1].dtype));
  const DType x_type = args.inputs[0].dtype;
  const bool per_axis_zp = args.has(2) && args.inputs[2].ElementCount() > 1;
  const bool has_zp = args.has(2);
  TensorKernel k;
  k.impl = "reference";
  k.run = [s, x_type, per_axis_zp, has_zp](const TensorCall& call) {
    const float* scale = static_cast<const float*>(call.inputs[1]);
    float* y = static_cast<float*>(call.outputs[0]);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t c = 0; c < s.channels; ++c) {
        const float sc = scale[s.channels > 1 ? c : 0];
        const int32_t zp = ReadInt(x_type, has_zp ? call.inputs[2] : nullptr, per_axis_zp ? c : 0);
        const int64_t base = (o * s.channels + c) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          // (x - zp) in int32 first (exact), then one rounding.
          y[base + i] = static_cast<float>(ReadInt(x_type, call.inputs[0], base + i) - zp) * sc;
        }
      }
    }
    return Status::Ok();
  };
  return k;
}

// ONNX's definition: the range [min(0, min x), max(0, max x)] onto 0..255.
Expected<TensorKernel> MakeDynamicQuantize(const TensorKernelArgs& args) {
  const int64_t n = args.inputs[0].ElementCount();
  TensorKernel k;
  k.impl = "reference";
  k.run = [n](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    const float scale = (hi - lo) / 255.0f;
    int32_t zp = 0;
    if (scale > 0) zp = SaturateRound((0.0f - lo) / scale, 0, DType::kU8);
    uint8_t* y = static_cast<uint8_t*>(call.outputs[0]);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = scale > 0 ? static_cast<uint8_t>(SaturateRound(x[i] / scale, zp, DType::kU8)) : static_cast<uint8_t>(zp);
    }
    *static_cast<float*>(call.outputs[1]) = scale;
    *static_cast<uint8_t*>(call.outputs[2]) = static_cast<uint8_t>(zp);
    return Status::Ok();
  };
  return k;
}

}  // namespace

void AddQuantKernels(std::vector<TensorKernelEntry>* kernels) {
  kernels->push_back({"QuantizeLinear", MakeQuantize, {DType::kF32, DType::kI32},
                      "uint8/int8 outputs, per tensor or per axis; no block_size"});
  kernels->push_back({"DequantizeLinear", MakeDequantize, {DType::kU8, DType::kI8, DType::kI32},
                      "per tensor or per axis; no block_size"});
  kernels->push_back({"DynamicQuantizeLinear", MakeDynamicQuantize, {DType::kF32}, ""});
  AddQuantMatMulKernels(kernels);
  AddQuantConvKernels(kernels);
}

}  // namespace kiln::cpu
