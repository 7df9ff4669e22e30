// Shape inference of the ops that make tensors from a description:
// ConstantOfShape, Range, OneHot, Trilu, EyeLike, and the resamplers
// Resize and Upsample.
#include <cmath>

#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/shape_op_groups.h"
#include "graph/tensor_ops/shape_op_params.h"

namespace kiln::shape_ops {
namespace {

bool IsPlain(DType t) {
  return !IsQuantized(t);
}

Expected<ShapeResult> InferConstantOfShape(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, src.Ints(0, "shape"));
  for (int64_t d : dims) {
    if (d < 0) return src.Error(fmt::format("shape [{}] has a negative dim", DimsToString(dims)));
  }
  const int64_t dtype = src.IntAttr("value_dtype", static_cast<int64_t>(DType::kF32));
  if (dtype < 0 || dtype >= kNumDTypes || !IsPlain(static_cast<DType>(dtype))) {
    return src.Error(fmt::format("value_dtype {} is not a plain dtype", dtype));
  }
  return OneOutput(TensorType{static_cast<DType>(dtype), dims});
}

// Range's element count: max(ceil((limit - start) / delta), 0).
Expected<ShapeResult> InferRange(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  const DType dtype = src.type(0).dtype;
  for (size_t i = 0; i < 3; ++i) {
    if (src.type(i).ElementCount() != 1 || src.type(i).dtype != dtype) {
      return src.Error(fmt::format("start, limit and delta must be scalars of one dtype; input {} is {}", i,
                                   src.type(i).ToString()));
    }
  }
  int64_t n = 0;
  if (dtype == DType::kI64 || dtype == DType::kI32 || dtype == DType::kI16 || dtype == DType::kI8) {
    KILN_ASSIGN_OR_RETURN(auto start, src.Ints(0, "start"));
    KILN_ASSIGN_OR_RETURN(auto limit, src.Ints(1, "limit"));
    KILN_ASSIGN_OR_RETURN(auto delta, src.Ints(2, "delta"));
    if (delta[0] == 0) return src.Error("delta is 0");
    const int64_t span = limit[0] - start[0];
    // Ceiling division of span by delta, for either sign.
    n = span / delta[0] + ((span % delta[0] != 0 && ((span > 0) == (delta[0] > 0))) ? 1 : 0);
  } else {
    KILN_ASSIGN_OR_RETURN(auto start, src.Doubles(0, "start"));
    KILN_ASSIGN_OR_RETURN(auto limit, src.Doubles(1, "limit"));
    KILN_ASSIGN_OR_RETURN(auto delta, src.Doubles(2, "delta"));
    if (delta[0] == 0) return src.Error("delta is 0");
    n = static_cast<int64_t>(std::ceil((limit[0] - start[0]) / delta[0]));
  }
  return OneOutput(TensorType{dtype, {std::max<int64_t>(n, 0)}});
}

Expected<ShapeResult> InferOneHot(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(auto depth, src.Doubles(1, "depth"));
  if (depth.size() != 1) return src.Error("depth must be a scalar");
  const auto d = static_cast<int64_t>(depth[0]);
  if (d <= 0) return src.Error(fmt::format("depth {} must be positive", depth[0]));
  if (src.type(2).ElementCount() != 2) {
    return src.Error(fmt::format("values must hold [off, on], got {}", src.type(2).ToString()));
  }
  std::vector<int64_t> dims = src.type(0).dims;
  const int64_t out_rank = src.rank0() + 1;
  KILN_ASSIGN_OR_RETURN(int64_t axis, src.Axis(src.IntAttr("axis", -1), out_rank));
  dims.insert(dims.begin() + axis, d);
  return OneOutput(TensorType{src.type(2).dtype, dims});
}

Expected<ShapeResult> InferTrilu(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  if (src.rank0() < 2)
    return src.Error(fmt::format("takes a tensor of rank 2 or more, got {}", src.type(0).ToString()));
  if (src.has(1) && src.type(1).ElementCount() != 1) return src.Error("k must be a scalar");
  return OneOutput(src.type(0));
}

}  // namespace

// EyeLike's dtype attribute is an ONNX TensorProto data type number.
Expected<DType> DTypeFromOnnxNumber(int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 5: return DType::kI16;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    case 16: return DType::kBF16;
    default: return Unsupported("ONNX data type {} is not supported", onnx_type);
  }
}

namespace {

Expected<ShapeResult> InferEyeLike(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  if (src.rank0() != 2) return src.Error(fmt::format("takes a 2-d tensor, got {}", src.type(0).ToString()));
  DType dtype = src.type(0).dtype;
  if (ctx.attrs->Has("dtype")) {
    auto t = DTypeFromOnnxNumber(src.IntAttr("dtype", 1));
    if (!t.ok()) return src.Error(t.status().message());
    dtype = *t;
  }
  return OneOutput(TensorType{dtype, src.type(0).dims});
}

Expected<ShapeResult> InferResize(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(ResizeParams p, ResolveResize(src));
  return OneOutput(TensorType{src.type(0).dtype, p.out_dims});
}

// Interpolation taps per output element.
double ResizeFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  const std::string mode = ctx.attrs->String("mode").ok() ? *ctx.attrs->String("mode") : "nearest";
  const double n = outputs.empty() ? 0 : static_cast<double>(outputs[0].ElementCount());
  if (mode == "linear" || mode == "bilinear") return 4 * n;
  if (mode == "cubic") return 16 * n;
  return 0;
}

}  // namespace

void AddShapeGenerateOpDefs(std::vector<TensorOpDef>* ops) {
  ops->push_back(ShapeOpDef("ConstantOfShape", 1, 1, InferConstantOfShape));
  ops->push_back(ShapeOpDef("Range", 3, 3, InferRange));
  ops->push_back(ShapeOpDef("OneHot", 3, 3, InferOneHot));
  ops->push_back(ShapeOpDef("Trilu", 1, 2, InferTrilu));
  ops->push_back(ShapeOpDef("EyeLike", 1, 1, InferEyeLike));
  TensorOpDef resize = ShapeOpDef("Resize", 1, 4, InferResize);
  resize.flops = ResizeFlops;
  ops->push_back(resize);
  TensorOpDef upsample = ShapeOpDef("Upsample", 1, 2, InferResize);
  upsample.flops = ResizeFlops;
  ops->push_back(upsample);
}

}  // namespace kiln::shape_ops
