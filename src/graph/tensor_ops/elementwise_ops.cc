// Shape inference of the elementwise ops: unary maps, binary ops with numpy
// broadcasting, and their relatives (Where, Clip, Cast, Dropout, PRelu).

#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/shape_op_params.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

constexpr int kManyInputs = 1 << 20;  // variadic ops (Sum, Max, ...)

// The broadcast shape of every present input.
Expected<std::vector<int64_t>> BroadcastAll(const ShapeContext& ctx) {
  std::vector<int64_t> dims;
  bool first = true;
  for (const TensorOpInput& in : ctx.inputs) {
    if (!in.present()) continue;
    if (first) {
      dims = in.type->dims;
      first = false;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(dims, BroadcastDims(ctx, dims, in.type->dims));
  }
  return dims;
}

// Inputs [begin, end) must all have input `begin`'s dtype.
Status SameDTypes(const ShapeContext& ctx, size_t begin, size_t end) {
  const DType want = ctx.input(begin).type->dtype;
  for (size_t i = begin + 1; i < end && i < ctx.inputs.size(); ++i) {
    if (!ctx.inputs[i].present()) continue;
    if (ctx.inputs[i].type->dtype != want) {
      return InvalidArgument("{} {}: input {} is {} but input {} is {}", ctx.op_type, ctx.node, i,
                             DTypeName(ctx.inputs[i].type->dtype), begin, DTypeName(want));
    }
  }
  return Status::Ok();
}

Expected<ShapeResult> InferBroadcastSameType(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(SameDTypes(ctx, 0, ctx.inputs.size()));
  KILN_ASSIGN_OR_RETURN(auto dims, BroadcastAll(ctx));
  return OneOutput(TensorType{ctx.input(0).type->dtype, std::move(dims)});
}

// Pow: the base's dtype; the exponent may be of another numeric type.
Expected<ShapeResult> InferPow(const ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto dims, BroadcastAll(ctx));
  return OneOutput(TensorType{ctx.input(0).type->dtype, std::move(dims)});
}

Expected<ShapeResult> InferCompare(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(SameDTypes(ctx, 0, 2));
  KILN_ASSIGN_OR_RETURN(auto dims, BroadcastAll(ctx));
  return OneOutput(TensorType{DType::kBool, std::move(dims)});
}

Expected<ShapeResult> InferLogical(const ShapeContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].type->dtype != DType::kBool) {
      return InvalidArgument("{} {}: input {} is {}, not bool", ctx.op_type, ctx.node, i,
                             DTypeName(ctx.inputs[i].type->dtype));
    }
  }
  KILN_ASSIGN_OR_RETURN(auto dims, BroadcastAll(ctx));
  return OneOutput(TensorType{DType::kBool, std::move(dims)});
}

Expected<ShapeResult> InferWhere(const ShapeContext& ctx) {
  if (ctx.input(0).type->dtype != DType::kBool) {
    return InvalidArgument("{} {}: the condition is {}, not bool", ctx.op_type, ctx.node,
                           DTypeName(ctx.input(0).type->dtype));
  }
  KILN_RETURN_IF_ERROR(SameDTypes(ctx, 1, 3));
  KILN_ASSIGN_OR_RETURN(auto dims, BroadcastAll(ctx));
  return OneOutput(TensorType{ctx.input(1).type->dtype, std::move(dims)});
}

Expected<ShapeResult> InferToBool(const ShapeContext& ctx) {
  return OneOutput(TensorType{DType::kBool, ctx.input(0).type->dims});
}

Expected<ShapeResult> InferNot(const ShapeContext& ctx) {
  if (ctx.input(0).type->dtype != DType::kBool) {
    return InvalidArgument("{} {}: input is {}, not bool", ctx.op_type, ctx.node,
                           DTypeName(ctx.input(0).type->dtype));
  }
  return SameAsInput0(ctx);
}

// PRelu's slope broadcasts to X in one direction: the output is X's shape.
Expected<ShapeResult> InferPRelu(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(SameDTypes(ctx, 0, 2));
  const auto& x = ctx.input(0).type->dims;
  KILN_ASSIGN_OR_RETURN(auto dims, BroadcastDims(ctx, x, ctx.input(1).type->dims));
  if (dims != x) {
    return InvalidArgument("{} {}: slope [{}] does not broadcast to X [{}]", ctx.op_type, ctx.node,
                           DimsToString(ctx.input(1).type->dims), DimsToString(x));
  }
  return SameAsInput0(ctx);
}

Expected<ShapeResult> InferClip(const ShapeContext& ctx) {
  for (size_t i = 1; i < 3; ++i) {
    TensorOpInput in = ctx.input(i);
    if (!in.present()) continue;
    if (in.type->ElementCount() != 1) {
      return InvalidArgument("{} {}: the {} input must be a scalar, got [{}]", ctx.op_type, ctx.node,
                             i == 1 ? "min" : "max", DimsToString(in.type->dims));
    }
  }
  KILN_RETURN_IF_ERROR(SameDTypes(ctx, 0, 3));
  return SameAsInput0(ctx);
}

Expected<ShapeResult> InferCast(const ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t to, ctx.a().Int("to"));
  Expected<DType> dtype = shape_ops::DTypeFromOnnxNumber(to);
  if (!dtype.ok())
    return Unsupported("{} {}: cast to ONNX data type {} is not supported", ctx.op_type, ctx.node, to);
  return OneOutput(TensorType{*dtype, ctx.input(0).type->dims});
}

Expected<ShapeResult> InferCastLike(const ShapeContext& ctx) {
  return OneOutput(TensorType{ctx.input(1).type->dtype, ctx.input(0).type->dims});
}

// Dropout in inference: the identity, and a mask of all true when asked.
Expected<ShapeResult> InferDropout(const ShapeContext& ctx) {
  TensorOpInput training = ctx.input(2);
  if (training.present()) {
    if (training.constant == nullptr) {
      return Unsupported("{} {}: training_mode is computed at run time; kiln runs Dropout in inference only",
                         ctx.op_type, ctx.node);
    }
    auto v = training.constant->ToInt64s();
    if (!v.ok() || v->size() != 1) {
      return InvalidArgument("{} {}: training_mode must be one bool", ctx.op_type, ctx.node);
    }
    // Training with ratio 0 drops nothing: still the identity.
    bool drops = (*v)[0] != 0;
    if (drops && ctx.input(1).present() && ctx.input(1).constant != nullptr) {
      auto ratio = ctx.input(1).constant->ToDoubles();
      drops = !(ratio.ok() && ratio->size() == 1 && (*ratio)[0] == 0.0);
    }
    if (drops) {
      return Unsupported("{} {}: training_mode is true; kiln runs Dropout in inference only", ctx.op_type,
                         ctx.node);
    }
  }
  if (ctx.opset < 7 && ctx.a().Has("is_test")) {
    KILN_ASSIGN_OR_RETURN(int64_t is_test, ctx.a().Int("is_test"));
    if (is_test == 0)
      return Unsupported("{} {}: is_test=0 (training); kiln runs inference only", ctx.op_type, ctx.node);
  }
  ShapeResult r = OneOutput(*ctx.input(0).type);
  if (ctx.num_outputs > 1) r.outputs.push_back(TensorType{DType::kBool, ctx.input(0).type->dims});
  return r;
}

void Add(std::vector<TensorOpDef>* ops, const char* name, int min_in, int max_in,
         Expected<ShapeResult> (*infer)(const ShapeContext&), int max_out = 1) {
  TensorOpDef d;
  d.op_type = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.max_outputs = max_out;
  d.infer = infer;
  ops->push_back(d);
}

}  // namespace

void AddElementwiseOpDefs(std::vector<TensorOpDef>* ops) {
  for (const char* name :
       {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos",
        "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Tanh", "Sigmoid", "Relu",
        "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Gelu", "Erf",
        "Mish", "ThresholdedRelu", "Identity", "BitwiseNot",
        // kiln's own: x * Sigmoid(x) in one pass, for the fuse stage to form from Mul(x, Sigmoid(x)).
        "kiln.Silu"}) {
    Add(ops, name, 1, 1, SameAsInput0);
  }
  for (const char* name :
       {"Add", "Sub", "Mul", "Div", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    Add(ops, name, 2, 2, InferBroadcastSameType);
  }
  Add(ops, "Pow", 2, 2, InferPow);
  for (const char* name : {"Min", "Max", "Sum", "Mean"})
    Add(ops, name, 1, kManyInputs, InferBroadcastSameType);
  for (const char* name : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    Add(ops, name, 2, 2, InferCompare);
  }
  for (const char* name : {"And", "Or", "Xor"}) Add(ops, name, 2, 2, InferLogical);
  Add(ops, "Not", 1, 1, InferNot);
  Add(ops, "IsNaN", 1, 1, InferToBool);
  Add(ops, "IsInf", 1, 1, InferToBool);
  Add(ops, "Where", 3, 3, InferWhere);
  Add(ops, "PRelu", 2, 2, InferPRelu);
  Add(ops, "Clip", 1, 3, InferClip);
  Add(ops, "Cast", 1, 1, InferCast);
  Add(ops, "CastLike", 2, 2, InferCastLike);
  Add(ops, "Dropout", 1, 3, InferDropout, 2);
}

}  // namespace kiln
