// Shape inference of the reduce family of tensor ops: the Reduce* ops,
// ArgMax/ArgMin, the softmax family, CumSum, TopK and the normalizations.
#include <algorithm>
#include <string>

#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

int64_t IntOr(const ShapeContext& ctx, const char* name, int64_t fallback) {
  auto v = ctx.a().Int(name);
  return v.ok() ? *v : fallback;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kF64 || t == DType::kBF16;
}

Status RequireFloat(const ShapeContext& ctx, size_t i) {
  const DType t = ctx.input(i).type->dtype;
  if (!IsFloat(t))
    return InvalidArgument("{} {}: input {} is {}, not a float type", ctx.op_type, ctx.node, i, DTypeName(t));
  return Status::Ok();
}

// Reduce*: axes from the attribute or (ReduceSum from opset 13, the others
// from 18) the optional second input; both forms are accepted in any opset.
Expected<ShapeResult> InferReduce(const ShapeContext& ctx) {
  const auto& dims = ctx.input(0).type->dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> axes;
  if (ctx.input(1).present()) {
    KILN_ASSIGN_OR_RETURN(axes, ConstantInts(ctx, 1, "axes"));
  } else if (ctx.a().Has("axes")) {
    KILN_ASSIGN_OR_RETURN(axes, ctx.a().Ints("axes"));
  }
  const bool keepdims = IntOr(ctx, "keepdims", 1) != 0;
  const bool noop = IntOr(ctx, "noop_with_empty_axes", 0) != 0;
  if (axes.empty() && noop) return SameAsInput0(ctx);
  std::vector<bool> reduced(dims.size(), axes.empty());
  for (int64_t axis : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, rank));
    if (rank == 0) continue;
    if (reduced[a]) return InvalidArgument("{} {}: axis {} is given twice", ctx.op_type, ctx.node, axis);
    reduced[a] = true;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!reduced[i]) {
      out.push_back(dims[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return OneOutput(TensorType{ctx.input(0).type->dtype, std::move(out)});
}

Expected<ShapeResult> InferArgReduce(const ShapeContext& ctx) {
  auto dims = ctx.input(0).type->dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank == 0) return InvalidArgument("{} {}: the input is a scalar", ctx.op_type, ctx.node);
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, IntOr(ctx, "axis", 0), rank));
  if (dims[axis] == 0) return InvalidArgument("{} {}: axis {} is empty", ctx.op_type, ctx.node, axis);
  if (IntOr(ctx, "keepdims", 1) != 0) {
    dims[axis] = 1;
  } else {
    dims.erase(dims.begin() + axis);
  }
  return OneOutput(TensorType{DType::kI64, std::move(dims)});
}

// Softmax, LogSoftmax, Hardmax: opset < 13 flattens to 2-d at `axis`
// (default 1); from 13 the op runs along `axis` (default -1).
Expected<ShapeResult> InferSoftmaxLike(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  const int64_t rank = ctx.input(0).type->rank();
  const int64_t axis = IntOr(ctx, "axis", ctx.opset < 13 ? 1 : -1);
  if (ctx.opset < 13) {
    // The flattening axis may equal the rank (everything in the outer part).
    if (axis < -rank || axis > rank) {
      return InvalidArgument("{} {}: axis {} is out of range for rank {}", ctx.op_type, ctx.node, axis, rank);
    }
  } else {
    KILN_RETURN_IF_ERROR(NormalizeAxis(ctx, axis, rank).status());
  }
  return SameAsInput0(ctx);
}

Expected<ShapeResult> InferCumSum(const ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto axis, ConstantInts(ctx, 1, "axis"));
  if (axis.size() != 1) return InvalidArgument("{} {}: axis must be one value", ctx.op_type, ctx.node);
  KILN_RETURN_IF_ERROR(NormalizeAxis(ctx, axis[0], ctx.input(0).type->rank()).status());
  return SameAsInput0(ctx);
}

// TopK: K from the second input (opset 10 on) or the `k` attribute.
Expected<ShapeResult> InferTopK(const ShapeContext& ctx) {
  auto dims = ctx.input(0).type->dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank == 0) return InvalidArgument("{} {}: the input is a scalar", ctx.op_type, ctx.node);
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, IntOr(ctx, "axis", -1), rank));
  int64_t k = 0;
  if (ctx.input(1).present()) {
    KILN_ASSIGN_OR_RETURN(auto ks, ConstantInts(ctx, 1, "K"));
    if (ks.size() != 1) return InvalidArgument("{} {}: K must be one value", ctx.op_type, ctx.node);
    k = ks[0];
  } else {
    KILN_ASSIGN_OR_RETURN(k, ctx.a().Int("k"));
  }
  if (k < 0 || k > dims[axis]) {
    return InvalidArgument("{} {}: K = {} is outside [0, {}] (axis {})", ctx.op_type, ctx.node, k, dims[axis],
                           axis);
  }
  dims[axis] = k;
  ShapeResult r;
  r.outputs.push_back(TensorType{ctx.input(0).type->dtype, dims});
  r.outputs.push_back(TensorType{DType::kI64, dims});
  return r;
}

// Input i must hold `count` elements (a per-channel parameter).
Status RequireCount(const ShapeContext& ctx, size_t i, int64_t count, const char* what) {
  TensorOpInput in = ctx.input(i);
  if (!in.present()) return Status::Ok();
  if (in.type->ElementCount() != count) {
    return InvalidArgument("{} {}: {} has shape [{}], expected {} elements", ctx.op_type, ctx.node, what,
                           DimsToString(in.type->dims), count);
  }
  if (in.type->dtype != ctx.input(0).type->dtype) {
    return InvalidArgument("{} {}: {} is {} but X is {}", ctx.op_type, ctx.node, what,
                           DTypeName(in.type->dtype), DTypeName(ctx.input(0).type->dtype));
  }
  return Status::Ok();
}

int64_t Channels(const TensorType& t) {
  return t.rank() >= 2 ? t.dims[1] : 1;
}

Expected<ShapeResult> InferBatchNorm(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  if (IntOr(ctx, "training_mode", 0) != 0 || ctx.num_outputs > 1) {
    return Unsupported(
        "{} {}: training mode (running mean/variance outputs) is not supported; kiln runs "
        "BatchNormalization in inference form",
        ctx.op_type, ctx.node);
  }
  if (ctx.opset < 9 && IntOr(ctx, "spatial", 1) == 0) {
    return Unsupported("{} {}: spatial=0 is not supported", ctx.op_type, ctx.node);
  }
  const int64_t c = Channels(*ctx.input(0).type);
  const char* names[] = {"X", "scale", "B", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) KILN_RETURN_IF_ERROR(RequireCount(ctx, i, c, names[i]));
  return SameAsInput0(ctx);
}

Expected<ShapeResult> InferInstanceNorm(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  if (ctx.input(0).type->rank() < 2)
    return InvalidArgument("{} {}: X must have rank >= 2", ctx.op_type, ctx.node);
  const int64_t c = Channels(*ctx.input(0).type);
  KILN_RETURN_IF_ERROR(RequireCount(ctx, 1, c, "scale"));
  KILN_RETURN_IF_ERROR(RequireCount(ctx, 2, c, "B"));
  return SameAsInput0(ctx);
}

// GroupNormalization: scale and bias per group (opset 18) or per channel (21).
Expected<ShapeResult> InferGroupNorm(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  const TensorType& x = *ctx.input(0).type;
  if (x.rank() < 2) return InvalidArgument("{} {}: X must have rank >= 2", ctx.op_type, ctx.node);
  KILN_ASSIGN_OR_RETURN(int64_t groups, ctx.a().Int("num_groups"));
  const int64_t c = x.dims[1];
  if (groups <= 0 || c % groups != 0) {
    return InvalidArgument("{} {}: num_groups {} does not divide the {} channels", ctx.op_type, ctx.node,
                           groups, c);
  }
  for (size_t i = 1; i < 3; ++i) {
    const int64_t n = ctx.input(i).type->ElementCount();
    KILN_RETURN_IF_ERROR(RequireCount(ctx, i, n == c ? c : groups, i == 1 ? "scale" : "bias"));
  }
  return SameAsInput0(ctx);
}

Expected<ShapeResult> InferLayerNorm(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  const TensorType& x = *ctx.input(0).type;
  KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, IntOr(ctx, "axis", -1), x.rank()));
  std::vector<int64_t> norm_dims(x.dims.begin() + axis, x.dims.end());
  for (size_t i = 1; i < 3; ++i) {
    TensorOpInput in = ctx.input(i);
    if (!in.present()) continue;
    if (in.type->dtype != x.dtype) {
      return InvalidArgument("{} {}: input {} is {} but X is {}", ctx.op_type, ctx.node, i,
                             DTypeName(in.type->dtype), DTypeName(x.dtype));
    }
    KILN_ASSIGN_OR_RETURN(auto b, BroadcastDims(ctx, norm_dims, in.type->dims));
    if (b != norm_dims) {
      return InvalidArgument("{} {}: {} [{}] does not broadcast to the normalized dims [{}]", ctx.op_type,
                             ctx.node, i == 1 ? "Scale" : "B", DimsToString(in.type->dims),
                             DimsToString(norm_dims));
    }
  }
  ShapeResult r = OneOutput(x);
  std::vector<int64_t> stat_dims = x.dims;
  for (size_t i = static_cast<size_t>(axis); i < stat_dims.size(); ++i) stat_dims[i] = 1;
  for (int i = 1; i < ctx.num_outputs; ++i) r.outputs.push_back(TensorType{DType::kF32, stat_dims});
  return r;
}

Expected<ShapeResult> InferLpNorm(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  KILN_RETURN_IF_ERROR(NormalizeAxis(ctx, IntOr(ctx, "axis", -1), ctx.input(0).type->rank()).status());
  const int64_t p = IntOr(ctx, "p", 2);
  if (p != 1 && p != 2) return InvalidArgument("{} {}: p = {} (1 or 2)", ctx.op_type, ctx.node, p);
  return SameAsInput0(ctx);
}

Expected<ShapeResult> InferMvn(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  std::vector<int64_t> axes = {0, 2, 3};
  if (ctx.a().Has("axes")) {
    KILN_ASSIGN_OR_RETURN(axes, ctx.a().Ints("axes"));
  }
  for (int64_t a : axes) KILN_RETURN_IF_ERROR(NormalizeAxis(ctx, a, ctx.input(0).type->rank()).status());
  return SameAsInput0(ctx);
}

// FLOPs per input element: reductions read each once; softmax takes an
// exp, a max, a sum and a scale per element; normalizations two passes of
// statistics and a scale and shift.
double InputElements(const ShapeContext& ctx) {
  return static_cast<double>(ctx.input(0).type->ElementCount());
}
double ReduceFlops(const ShapeContext& ctx, const std::vector<TensorType>&) {
  return InputElements(ctx);
}
double SoftmaxFlops(const ShapeContext& ctx, const std::vector<TensorType>&) {
  return 5.0 * InputElements(ctx);
}
double NormFlops(const ShapeContext& ctx, const std::vector<TensorType>&) {
  return 7.0 * InputElements(ctx);
}

void Add(std::vector<TensorOpDef>* ops, const char* name, int min_in, int max_in,
         Expected<ShapeResult> (*infer)(const ShapeContext&), int min_out = 1, int max_out = 1) {
  TensorOpDef d;
  d.op_type = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.min_outputs = min_out;
  d.max_outputs = max_out;
  d.infer = infer;
  const std::string op = name;
  if (op.rfind("Reduce", 0) == 0 || op.rfind("Arg", 0) == 0 || op == "CumSum" || op == "TopK") {
    d.flops = ReduceFlops;
  } else if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
    d.flops = SoftmaxFlops;
  } else if (op.find("Normalization") != std::string::npos) {
    d.flops = NormFlops;
  }
  ops->push_back(d);
}

}  // namespace

void AddReduceOpDefs(std::vector<TensorOpDef>* ops) {
  for (const char* name : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    Add(ops, name, 1, 2, InferReduce);
  }
  Add(ops, "ArgMax", 1, 1, InferArgReduce);
  Add(ops, "ArgMin", 1, 1, InferArgReduce);
  for (const char* name : {"Softmax", "LogSoftmax", "Hardmax"}) Add(ops, name, 1, 1, InferSoftmaxLike);
  Add(ops, "CumSum", 2, 2, InferCumSum);
  Add(ops, "TopK", 1, 2, InferTopK, 2, 2);
  Add(ops, "LayerNormalization", 2, 3, InferLayerNorm, 1, 3);
  Add(ops, "BatchNormalization", 5, 5, InferBatchNorm, 1, 5);
  Add(ops, "InstanceNormalization", 3, 3, InferInstanceNorm);
  Add(ops, "GroupNormalization", 3, 3, InferGroupNorm);
  Add(ops, "LpNormalization", 1, 1, InferLpNorm);
  Add(ops, "MeanVarianceNormalization", 1, 1, InferMvn);
}

}  // namespace kiln
