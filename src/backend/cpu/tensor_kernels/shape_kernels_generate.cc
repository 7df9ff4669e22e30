// The CPU kernels that make tensors from a description: ConstantOfShape,
// Range, OneHot, Trilu, EyeLike. Most of them run once, when the compiler
// folds them; they are plain loops.
#include <cmath>
#include <cstring>

#include "backend/cpu/tensor_kernels/shape_kernel_groups.h"
#include "backend/cpu/tensor_kernels/shape_kernel_params.h"
#include "backend/cpu/tensor_kernels/tensor_scalar.h"

namespace kiln::cpu::shape_kernels {

using namespace ::kiln::shape_ops;  // the parameters these kernels share with shape inference
namespace {

Expected<TensorKernel> MakeConstantOfShape(const TensorKernelArgs& args) {
  const TensorType out = args.outputs[0];
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(out.dtype));
  KernelParams params(args);
  const double value = params.AtBind().FloatAttr("value", 0.0);
  uint8_t fill[8] = {0};
  EncodeScalar(out.dtype, value, fill);
  TensorKernel k;
  k.impl = "fill";
  k.run = [=](const TensorCall& call) {
    FillElements(static_cast<uint8_t*>(call.outputs[0]), fill, elem, out.ElementCount());
    return Status::Ok();
  };
  return k;
}

// Range: start + i * delta, computed in int64 or double.
Expected<TensorKernel> MakeRange(const TensorKernelArgs& args) {
  const TensorType out = args.outputs[0];
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(out.dtype));
  const bool integer = out.dtype == DType::kI64 || out.dtype == DType::kI32 || out.dtype == DType::kI16 ||
                       out.dtype == DType::kI8;
  TensorKernel k;
  k.impl = "reference";
  k.run = [=](const TensorCall& call) {
    const int64_t n = out.ElementCount();
    auto* y = static_cast<uint8_t*>(call.outputs[0]);
    if (integer) {
      std::vector<int64_t> start, delta;
      ReadInts(out.dtype, call.inputs[0], 1, &start);
      ReadInts(out.dtype, call.inputs[2], 1, &delta);
      for (int64_t i = 0; i < n; ++i) {
        EncodeScalar(out.dtype, static_cast<double>(start[0] + i * delta[0]),
                     y + i * static_cast<int64_t>(elem));
      }
      // int64 values beyond double's exact range: write them directly.
      if (out.dtype == DType::kI64) {
        auto* y64 = reinterpret_cast<int64_t*>(y);
        for (int64_t i = 0; i < n; ++i) y64[i] = start[0] + i * delta[0];
      }
    } else {
      std::vector<double> start, delta;
      ReadDoubles(out.dtype, call.inputs[0], 1, &start);
      ReadDoubles(out.dtype, call.inputs[2], 1, &delta);
      for (int64_t i = 0; i < n; ++i) {
        EncodeScalar(out.dtype, start[0] + static_cast<double>(i) * delta[0],
                     y + i * static_cast<int64_t>(elem));
      }
    }
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeOneHot(const TensorKernelArgs& args) {
  const TensorType out = args.outputs[0];
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(out.dtype));
  const TensorType idx = args.inputs[0];
  const int64_t axis_attr = args.a().Int("axis").ok() ? *args.a().Int("axis") : -1;
  const int64_t out_rank = out.rank();
  const int64_t axis = axis_attr < 0 ? axis_attr + out_rank : axis_attr;
  const int64_t depth = out.dims[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < idx.rank(); ++a) (a < axis ? outer : inner) *= idx.dims[static_cast<size_t>(a)];
  const std::string op(args.op_type), node(args.node);
  TensorKernel k;
  k.impl = "reference";
  k.run = [=](const TensorCall& call) -> Status {
    std::vector<double> v;
    if (!ReadDoubles(idx.dtype, call.inputs[0], idx.ElementCount(), &v)) {
      return Unsupported("{} {}: indices of dtype {}", op, node, DTypeName(idx.dtype));
    }
    const auto* values = static_cast<const uint8_t*>(call.inputs[2]);
    auto* y = static_cast<uint8_t*>(call.outputs[0]);
    const auto e = static_cast<int64_t>(elem);
    FillElements(y, values, elem, out.ElementCount());  // off
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto c = static_cast<int64_t>(v[static_cast<size_t>(o * inner + i)]);
        if (c < 0) c += depth;
        if (c < 0 || c >= depth) continue;  // out of range: all off, as ONNX says
        std::memcpy(y + ((o * depth + c) * inner + i) * e, values + e, elem);
      }
    }
    return Status::Ok();
  };
  return k;
}

// Trilu: keeps the upper (col - row >= k) or lower (col - row <= k)
// triangle of each matrix in the last two axes, zeroing the rest.
Expected<TensorKernel> MakeTrilu(const TensorKernelArgs& args) {
  const TensorType t = args.inputs[0];
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(t.dtype));
  const bool upper = !args.a().Int("upper").ok() || *args.a().Int("upper") != 0;
  const bool has_k = args.has(1);
  const DType k_type = has_k ? args.inputs[1].dtype : DType::kI64;
  const int64_t rows = t.dims[t.dims.size() - 2], cols = t.dims.back();
  const int64_t mats = rows * cols == 0 ? 0 : t.ElementCount() / (rows * cols);
  TensorKernel kernel;
  kernel.impl = "reference";
  kernel.run = [=](const TensorCall& call) {
    int64_t k = 0;
    if (has_k) {
      std::vector<int64_t> kv;
      ReadInts(k_type, call.inputs[1], 1, &kv);
      k = kv.empty() ? 0 : kv[0];
    }
    const auto* x = static_cast<const uint8_t*>(call.inputs[0]);
    auto* y = static_cast<uint8_t*>(call.outputs[0]);
    const auto e = static_cast<int64_t>(elem);
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t off = (m * rows + r) * cols * e;
        for (int64_t c = 0; c < cols; ++c) {
          const bool keep = upper ? c - r >= k : c - r <= k;
          if (keep) {
            std::memcpy(y + off + c * e, x + off + c * e, elem);
          } else {
            std::memset(y + off + c * e, 0, elem);
          }
        }
      }
    }
    return Status::Ok();
  };
  return kernel;
}

Expected<TensorKernel> MakeEyeLike(const TensorKernelArgs& args) {
  const TensorType out = args.outputs[0];
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(out.dtype));
  const int64_t k = args.a().Int("k").ok() ? *args.a().Int("k") : 0;
  uint8_t one[8] = {0};
  EncodeScalar(out.dtype, 1.0, one);
  TensorKernel kernel;
  kernel.impl = "reference";
  kernel.run = [=](const TensorCall& call) {
    auto* y = static_cast<uint8_t*>(call.outputs[0]);
    const int64_t rows = out.dims[0], cols = out.dims[1];
    std::memset(y, 0, out.Bytes());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t c = r + k;
      if (c >= 0 && c < cols) std::memcpy(y + (r * cols + c) * static_cast<int64_t>(elem), one, elem);
    }
    return Status::Ok();
  };
  return kernel;
}

}  // namespace

void AddShapeGenerateKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::vector<DType>& any = MovableDTypes();
  kernels->push_back({"ConstantOfShape", MakeConstantOfShape, {DType::kI64}, "shape known at compile time"});
  kernels->push_back({"Range", MakeRange, any, "start/limit/delta known at compile time"});
  kernels->push_back({"OneHot", MakeOneHot, any, "depth known at compile time"});
  kernels->push_back({"Trilu", MakeTrilu, any, ""});
  kernels->push_back({"EyeLike", MakeEyeLike, any, "dtype is an ONNX TensorProto type number"});
}

}  // namespace kiln::cpu::shape_kernels
