// Shape inference of the shape family: views and re-layouts (Shape, Size,
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile,
// DepthToSpace, SpaceToDepth); the other groups live beside this file.
#include <algorithm>

#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/shape_op_groups.h"
#include "graph/tensor_ops/shape_op_params.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln::shape_ops {
namespace {

TensorType WithDims(const TensorType& t, std::vector<int64_t> dims) {
  return TensorType{t.dtype, std::move(dims)};
}

// Shape (start/end from opset 15) and its compile-time value.
Expected<ShapeResult> InferShape(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  const std::vector<int64_t>& dims = src.type(0).dims;
  const auto rank = static_cast<int64_t>(dims.size());
  int64_t start = src.IntAttr("start", 0);
  int64_t end = src.IntAttr("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> value;
  for (int64_t i = start; i < end; ++i) value.push_back(dims[static_cast<size_t>(i)]);
  ShapeResult r = OneOutput(TensorType{DType::kI64, {static_cast<int64_t>(value.size())}});
  r.constants.push_back(
      TensorData::FromValues<int64_t>(DType::kI64, {static_cast<int64_t>(value.size())}, value));
  return r;
}

Expected<ShapeResult> InferSize(const ShapeContext& ctx) {
  const int64_t n = ctx.input(0).type->ElementCount();
  ShapeResult r = OneOutput(TensorType{DType::kI64, {}});
  r.constants.push_back(TensorData::FromValues<int64_t>(DType::kI64, {}, std::vector<int64_t>{n}));
  return r;
}

Expected<ShapeResult> InferReshape(const ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ResolveReshapeDims(ParamSourceFromContext(ctx)));
  return OneOutput(WithDims(*ctx.input(0).type, std::move(dims)));
}

Expected<ShapeResult> InferFlatten(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  const std::vector<int64_t>& dims = src.type(0).dims;
  const auto rank = static_cast<int64_t>(dims.size());
  int64_t axis = src.IntAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return src.Error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= dims[static_cast<size_t>(i)];
  return OneOutput(WithDims(src.type(0), {outer, inner}));
}

Expected<ShapeResult> InferSqueeze(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  bool all_ones = false;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ResolveSqueezeAxes(src, src.rank0(), &all_ones));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < src.rank0(); ++i) {
    if (!std::binary_search(axes.begin(), axes.end(), i))
      dims.push_back(src.type(0).dims[static_cast<size_t>(i)]);
  }
  return OneOutput(WithDims(src.type(0), std::move(dims)));
}

Expected<ShapeResult> InferUnsqueeze(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ResolveUnsqueezeAxes(src));
  const int64_t out_rank = src.rank0() + static_cast<int64_t>(axes.size());
  std::vector<int64_t> dims;
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    dims.push_back(std::binary_search(axes.begin(), axes.end(), i) ? 1 : src.type(0).dims[next++]);
  }
  return OneOutput(WithDims(src.type(0), std::move(dims)));
}

Expected<ShapeResult> InferTranspose(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ResolvePermutation(src, src.rank0()));
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(src.type(0).dims[static_cast<size_t>(p)]);
  return OneOutput(WithDims(src.type(0), std::move(dims)));
}

Expected<ShapeResult> InferExpand(const ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(ctx, 1, "shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, BroadcastDims(ctx, ctx.input(0).type->dims, shape));
  return OneOutput(WithDims(*ctx.input(0).type, std::move(dims)));
}

Expected<ShapeResult> InferTile(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, src.Ints(1, "repeats"));
  if (static_cast<int64_t>(repeats.size()) != src.rank0()) {
    return src.Error(fmt::format("repeats [{}] must have one entry per axis of {}", DimsToString(repeats),
                                 src.type(0).ToString()));
  }
  std::vector<int64_t> dims = src.type(0).dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (repeats[i] < 0)
      return src.Error(fmt::format("repeats [{}] has a negative entry", DimsToString(repeats)));
    dims[i] *= repeats[i];
  }
  return OneOutput(WithDims(src.type(0), std::move(dims)));
}

Expected<ShapeResult> InferDepthToSpace(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(BlockParams b, ResolveBlock(src));
  const std::vector<int64_t>& d = src.type(0).dims;
  if (d[1] % (b.block * b.block) != 0) {
    return src.Error(
        fmt::format("channels {} are not a multiple of blocksize^2 = {}", d[1], b.block * b.block));
  }
  return OneOutput(WithDims(src.type(0), {d[0], d[1] / (b.block * b.block), d[2] * b.block, d[3] * b.block}));
}

Expected<ShapeResult> InferSpaceToDepth(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(BlockParams b, ResolveBlock(src));
  const std::vector<int64_t>& d = src.type(0).dims;
  if (d[2] % b.block != 0 || d[3] % b.block != 0) {
    return src.Error(
        fmt::format("height {} and width {} must be multiples of blocksize {}", d[2], d[3], b.block));
  }
  return OneOutput(WithDims(src.type(0), {d[0], d[1] * b.block * b.block, d[2] / b.block, d[3] / b.block}));
}

}  // namespace

TensorOpDef ShapeOpDef(const char* name, int min_in, int max_in,
                       Expected<ShapeResult> (*infer)(const ShapeContext&), int min_out, int max_out) {
  TensorOpDef d;
  d.op_type = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.min_outputs = min_out;
  d.max_outputs = max_out;
  d.infer = infer;
  d.flops = NoFlops;
  return d;
}

double NoFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  (void)ctx;
  (void)outputs;
  return 0;
}

void AddShapeViewOpDefs(std::vector<TensorOpDef>* ops) {
  ops->push_back(ShapeOpDef("Shape", 1, 1, InferShape));
  ops->push_back(ShapeOpDef("Size", 1, 1, InferSize));
  ops->push_back(ShapeOpDef("Reshape", 2, 2, InferReshape));
  ops->push_back(ShapeOpDef("Flatten", 1, 1, InferFlatten));
  ops->push_back(ShapeOpDef("Squeeze", 1, 2, InferSqueeze));
  ops->push_back(ShapeOpDef("Unsqueeze", 1, 2, InferUnsqueeze));
  ops->push_back(ShapeOpDef("Transpose", 1, 1, InferTranspose));
  ops->push_back(ShapeOpDef("Expand", 2, 2, InferExpand));
  ops->push_back(ShapeOpDef("Tile", 2, 2, InferTile));
  ops->push_back(ShapeOpDef("DepthToSpace", 1, 1, InferDepthToSpace));
  ops->push_back(ShapeOpDef("SpaceToDepth", 1, 1, InferSpaceToDepth));
}

}  // namespace kiln::shape_ops

namespace kiln {

void AddShapeOpDefs(std::vector<TensorOpDef>* ops) {
  shape_ops::AddShapeViewOpDefs(ops);
  shape_ops::AddShapeSelectOpDefs(ops);
  shape_ops::AddShapeGenerateOpDefs(ops);
}

}  // namespace kiln
