// The CPU's quantization kernels: QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear (per tensor and per axis); the quantized products
// (qmatmul_kernels.cc) and convolutions (qconv_kernels.cc) register here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/cpu/kernels/parallel.h"
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
  KILN_ASSIGN_OR_RETURN(int64_t axis, CheckedIntAttrOr(args.a(), "axis", 1));
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += rank;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) s.outer *= dims[static_cast<size_t>(d)];
    if (d == axis) s.channels = dims[static_cast<size_t>(d)];
    if (d > axis) s.inner *= dims[static_cast<size_t>(d)];
  }
  return s;
}

// x (f32 or int32) to Out (uint8 or int8) over elements [begin, end) of
// the [outer, channels, inner] view.
template <typename In, typename Out>
void QuantizeRange(const AxisSplit& s, const In* x, const float* scale, const Out* zp, Out* y, int64_t begin,
                   int64_t end) {
  const float lo = std::is_signed_v<Out> ? -128.0f : 0.0f, hi = std::is_signed_v<Out> ? 127.0f : 255.0f;
  for (int64_t i = begin; i < end;) {
    const int64_t c = (i / s.inner) % s.channels;
    const int64_t stop = std::min(end, (i / s.inner + 1) * s.inner);
    const float sc = scale[c];
    const float z = zp != nullptr ? static_cast<float>(zp[c]) : 0.0f;
    for (int64_t j = i; j < stop; ++j) {
      y[j] = static_cast<Out>(
          static_cast<int32_t>(RoundHalfEvenClamped(static_cast<float>(x[j]) / sc, z, lo, hi)));
    }
    i = stop;
  }
}

template <typename In, typename Out>
void DequantizeRange(const AxisSplit& s, const In* x, const float* scale, const In* zp, float* y,
                     int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end;) {
    const int64_t c = (i / s.inner) % s.channels;
    const int64_t stop = std::min(end, (i / s.inner + 1) * s.inner);
    const float sc = scale[c];
    const int32_t z = zp != nullptr ? static_cast<int32_t>(zp[c]) : 0;
    // (x - zp) in int32 first (exact), then one rounding.
    for (int64_t j = i; j < stop; ++j) y[j] = static_cast<float>(static_cast<int32_t>(x[j]) - z) * sc;
    i = stop;
  }
}

// Elements per thread below which splitting costs more than it saves.
constexpr int64_t kMinPerThread = 16384;

Expected<TensorKernel> MakeQuantize(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(AxisSplit s, SplitFor(args));
  if (args.inputs[1].dtype != DType::kF32)
    return Unsupported("y_scale dtype {} (f32 only)", DTypeName(args.inputs[1].dtype));
  const DType x_type = args.inputs[0].dtype;
  const DType out = args.outputs[0].dtype;
  const bool has_zp = args.has(2);
  if (has_zp && args.inputs[2].ElementCount() != s.channels) {
    return InvalidArgument("y_zero_point has {} values for {} scales", args.inputs[2].ElementCount(),
                           s.channels);
  }
  const int64_t n = args.inputs[0].ElementCount();
  TensorKernel k;
  k.impl = "kiln";
  k.run = [s, x_type, out, has_zp, n](const TensorCall& call) {
    const float* scale = static_cast<const float*>(call.inputs[1]);
    const void* zp = has_zp ? call.inputs[2] : nullptr;
    KernelContext ctx{call.pool, BestIsa()};
    ParallelRanges(ctx, n, kMinPerThread, [&](int64_t begin, int64_t end, int) {
      const bool f32 = x_type == DType::kF32;
      if (out == DType::kI8) {
        auto* y = static_cast<int8_t*>(call.outputs[0]);
        const auto* z = static_cast<const int8_t*>(zp);
        if (f32)
          QuantizeRange(s, static_cast<const float*>(call.inputs[0]), scale, z, y, begin, end);
        else
          QuantizeRange(s, static_cast<const int32_t*>(call.inputs[0]), scale, z, y, begin, end);
      } else {
        auto* y = static_cast<uint8_t*>(call.outputs[0]);
        const auto* z = static_cast<const uint8_t*>(zp);
        if (f32)
          QuantizeRange(s, static_cast<const float*>(call.inputs[0]), scale, z, y, begin, end);
        else
          QuantizeRange(s, static_cast<const int32_t*>(call.inputs[0]), scale, z, y, begin, end);
      }
    });
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeDequantize(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(AxisSplit s, SplitFor(args));
  if (args.inputs[1].dtype != DType::kF32)
    return Unsupported("x_scale dtype {} (f32 only)", DTypeName(args.inputs[1].dtype));
  const DType x_type = args.inputs[0].dtype;
  const bool has_zp = args.has(2);
  if (has_zp && args.inputs[2].ElementCount() != s.channels) {
    return InvalidArgument("x_zero_point has {} values for {} scales", args.inputs[2].ElementCount(),
                           s.channels);
  }
  const int64_t n = args.inputs[0].ElementCount();
  TensorKernel k;
  k.impl = "kiln";
  k.run = [s, x_type, has_zp, n](const TensorCall& call) {
    const float* scale = static_cast<const float*>(call.inputs[1]);
    const void* zp = has_zp ? call.inputs[2] : nullptr;
    float* y = static_cast<float*>(call.outputs[0]);
    KernelContext ctx{call.pool, BestIsa()};
    ParallelRanges(ctx, n, kMinPerThread, [&](int64_t begin, int64_t end, int) {
      switch (x_type) {
        case DType::kI8:
          DequantizeRange<int8_t, float>(s, static_cast<const int8_t*>(call.inputs[0]), scale,
                                         static_cast<const int8_t*>(zp), y, begin, end);
          break;
        case DType::kU8:
          DequantizeRange<uint8_t, float>(s, static_cast<const uint8_t*>(call.inputs[0]), scale,
                                          static_cast<const uint8_t*>(zp), y, begin, end);
          break;
        default:
          DequantizeRange<int32_t, float>(s, static_cast<const int32_t*>(call.inputs[0]), scale,
                                          static_cast<const int32_t*>(zp), y, begin, end);
          break;
      }
    });
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
      y[i] = scale > 0 ? static_cast<uint8_t>(SaturateRound(x[i] / scale, zp, DType::kU8))
                       : static_cast<uint8_t>(zp);
    }
    *static_cast<float*>(call.outputs[1]) = scale;
    *static_cast<uint8_t*>(call.outputs[2]) = static_cast<uint8_t>(zp);
    return Status::Ok();
  };
  return k;
}

}  // namespace

void AddQuantKernels(std::vector<TensorKernelEntry>* kernels) {
  kernels->push_back({"QuantizeLinear",
                      MakeQuantize,
                      {DType::kF32, DType::kI32},
                      "uint8/int8 outputs, per tensor or per axis; no block_size"});
  kernels->push_back({"DequantizeLinear",
                      MakeDequantize,
                      {DType::kU8, DType::kI8, DType::kI32},
                      "per tensor or per axis; no block_size"});
  kernels->push_back({"DynamicQuantizeLinear", MakeDynamicQuantize, {DType::kF32}, ""});
  AddQuantMatMulKernels(kernels);
  AddQuantConvKernels(kernels);
}

}  // namespace kiln::cpu
