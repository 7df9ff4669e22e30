// Shape inference of the quantized ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger,
// QLinearConv, and kiln.QLinearMatMul, the fused form of a
// DequantizeLinear -> MatMul [-> Add bias] [-> QuantizeLinear] chain:
//
//   kiln.QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point,
//                      [bias], [y_scale], [y_zero_point]) -> y
//   real = (a - a_zp) a_scale @ (b - b_zp) b_scale + bias
//   y = QuantizeLinear(real, y_scale, y_zp) when y_scale is given (y has
//   y_zero_point's dtype, uint8 without one), else y = real (f32).
//   a, b: uint8 or int8, batched as MatMul; a_scale, a_zero_point per
//   tensor; b_scale, b_zero_point per tensor or per column ([N]); bias f32
//   [N]. No attributes.
#include "graph/tensor_ops/matmul_shape.h"
#include "graph/tensor_ops/quant_conv_shape.h"
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

bool IsInt8(DType t) {
  return t == DType::kU8 || t == DType::kI8;
}

Status CheckInt8(const ShapeContext& ctx, size_t i, const char* what) {
  const DType t = ctx.input(i).type->dtype;
  if (!IsInt8(t))
    return InvalidArgument("{} {}: {} is {}, expected uint8 or int8", ctx.op_type, ctx.node, what,
                           DTypeName(t));
  return Status::Ok();
}

// A scale or zero point: one value, or `per_axis` values (0: must be one).
Status CheckQuantParam(const ShapeContext& ctx, size_t i, const char* what, int64_t per_axis) {
  if (!ctx.input(i).present()) return Status::Ok();
  const TensorType& t = *ctx.input(i).type;
  const int64_t n = t.ElementCount();
  if (t.rank() > 1 || (n != 1 && n != per_axis)) {
    return InvalidArgument("{} {}: {} [{}] must be a scalar{}", ctx.op_type, ctx.node, what,
                           DimsToString(t.dims),
                           per_axis > 1 ? " or 1-d of " + std::to_string(per_axis) : std::string());
  }
  return Status::Ok();
}

// The axis QuantizeLinear/DequantizeLinear scale along, and its size.
Expected<int64_t> QuantAxisSize(const ShapeContext& ctx) {
  const TensorType& x = *ctx.input(0).type;
  KILN_ASSIGN_OR_RETURN(int64_t block, CheckedIntAttrOr(ctx.a(), "block_size", 0));
  if (block != 0)
    return Unsupported("{} {}: blocked quantization (block_size {}) is not supported", ctx.op_type, ctx.node,
                       block);
  KILN_ASSIGN_OR_RETURN(int64_t axis, CheckedIntAttrOr(ctx.a(), "axis", 1));
  if (x.rank() == 0 || ctx.input(1).type->ElementCount() == 1) return 1;
  KILN_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, x.rank()));
  return x.dims[static_cast<size_t>(a)];
}

Expected<ShapeResult> InferQuantize(const ShapeContext& ctx) {
  const TensorType& x = *ctx.input(0).type;
  if (x.dtype != DType::kF32 && x.dtype != DType::kI32) {
    return InvalidArgument("QuantizeLinear {}: x is {}, expected f32 (or int32)", ctx.node,
                           DTypeName(x.dtype));
  }
  KILN_ASSIGN_OR_RETURN(int64_t per_axis, QuantAxisSize(ctx));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 1, "y_scale", per_axis));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "y_zero_point", per_axis));
  DType out = DType::kU8;
  if (ctx.input(2).present()) {
    KILN_RETURN_IF_ERROR(CheckInt8(ctx, 2, "y_zero_point"));
    out = ctx.input(2).type->dtype;
  }
  return OneOutput(TensorType{out, x.dims});
}

Expected<ShapeResult> InferDequantize(const ShapeContext& ctx) {
  const TensorType& x = *ctx.input(0).type;
  if (!IsInt8(x.dtype) && x.dtype != DType::kI32) {
    return InvalidArgument("DequantizeLinear {}: x is {}, expected uint8, int8 or int32", ctx.node,
                           DTypeName(x.dtype));
  }
  KILN_ASSIGN_OR_RETURN(int64_t per_axis, QuantAxisSize(ctx));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 1, "x_scale", per_axis));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "x_zero_point", per_axis));
  if (ctx.input(2).present() && ctx.input(2).type->dtype != x.dtype) {
    return InvalidArgument("DequantizeLinear {}: x_zero_point is {}, x is {}", ctx.node,
                           DTypeName(ctx.input(2).type->dtype), DTypeName(x.dtype));
  }
  return OneOutput(TensorType{DType::kF32, x.dims});
}

Expected<ShapeResult> InferDynamicQuantize(const ShapeContext& ctx) {
  const TensorType& x = *ctx.input(0).type;
  if (x.dtype != DType::kF32)
    return InvalidArgument("DynamicQuantizeLinear {}: x is {}, expected f32", ctx.node, DTypeName(x.dtype));
  ShapeResult r;
  r.outputs = {TensorType{DType::kU8, x.dims}, TensorType{DType::kF32, {}}, TensorType{DType::kU8, {}}};
  return r;
}

Expected<ShapeResult> InferMatMulInteger(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 0, "A"));
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 1, "B"));
  KILN_ASSIGN_OR_RETURN(
      MatMulShape s, MatMulShapeOf(ctx.op_type, ctx.node, ctx.input(0).type->dims, ctx.input(1).type->dims));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "a_zero_point", ctx.input(0).type->rank() >= 2 ? s.m : 1));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 3, "b_zero_point", ctx.input(1).type->rank() >= 2 ? s.n : 1));
  return OneOutput(TensorType{DType::kI32, s.out_dims});
}

// QLinearMatMul and kiln.QLinearMatMul: inputs a, a_scale, a_zp, b, b_scale, b_zp, then either
// y_scale, y_zp (QLinearMatMul) or [bias], [y_scale], [y_zp] (the fused form).
Expected<ShapeResult> InferQLinearMatMul(const ShapeContext& ctx) {
  const bool fused = ctx.op_type != "QLinearMatMul";
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 0, "a"));
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 3, "b"));
  KILN_ASSIGN_OR_RETURN(
      MatMulShape s, MatMulShapeOf(ctx.op_type, ctx.node, ctx.input(0).type->dims, ctx.input(3).type->dims));
  const int64_t rows = ctx.input(0).type->rank() >= 2 ? s.m : 1;
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 1, "a_scale", fused ? 1 : rows));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "a_zero_point", fused ? 1 : rows));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 4, "b_scale", s.n));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 5, "b_zero_point", s.n));
  const size_t y_scale = fused ? 7 : 6;
  if (fused && ctx.input(6).present()) {
    const TensorType& bias = *ctx.input(6).type;
    if (bias.dtype != DType::kF32 || bias.ElementCount() != s.n || bias.rank() > 1) {
      return InvalidArgument("{} {}: bias {} must be f32 [{}]", ctx.op_type, ctx.node, bias.ToString(), s.n);
    }
  }
  if (!ctx.input(y_scale).present()) {
    if (!fused) return InvalidArgument("QLinearMatMul {}: y_scale is required", ctx.node);
    return OneOutput(TensorType{DType::kF32, s.out_dims});
  }
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, y_scale, "y_scale", 1));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, y_scale + 1, "y_zero_point", 1));
  DType out = DType::kU8;
  if (ctx.input(y_scale + 1).present()) {
    KILN_RETURN_IF_ERROR(CheckInt8(ctx, y_scale + 1, "y_zero_point"));
    out = ctx.input(y_scale + 1).type->dtype;
  }
  return OneOutput(TensorType{out, s.out_dims});
}

double QMatMulFlops(const ShapeContext& ctx, const std::vector<TensorType>&) {
  const size_t b = ctx.op_type == "MatMulInteger" ? 1 : 3;
  auto s = MatMulShapeOf(ctx.op_type, ctx.node, ctx.input(0).type->dims, ctx.input(b).type->dims);
  if (!s.ok()) return 0;
  return 2.0 * static_cast<double>(s->batch) * static_cast<double>(s->m) * static_cast<double>(s->n) *
         static_cast<double>(s->k);
}

Expected<ShapeResult> InferConvInteger(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 0, "x"));
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 1, "w"));
  KILN_ASSIGN_OR_RETURN(QConvGeometry g, QConvGeometryOf(ctx.op_type, ctx.node, ctx.a(),
                                                         ctx.input(0).type->dims, ctx.input(1).type->dims));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "x_zero_point", 1));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 3, "w_zero_point", g.out_channels));
  return OneOutput(TensorType{DType::kI32, g.OutputDims()});
}

Expected<ShapeResult> InferQLinearConv(const ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 0, "x"));
  KILN_RETURN_IF_ERROR(CheckInt8(ctx, 3, "w"));
  KILN_ASSIGN_OR_RETURN(QConvGeometry g, QConvGeometryOf(ctx.op_type, ctx.node, ctx.a(),
                                                         ctx.input(0).type->dims, ctx.input(3).type->dims));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 1, "x_scale", 1));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 2, "x_zero_point", 1));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 4, "w_scale", g.out_channels));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 5, "w_zero_point", g.out_channels));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 6, "y_scale", 1));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, 7, "y_zero_point", 1));
  if (ctx.input(8).present()) {
    const TensorType& bias = *ctx.input(8).type;
    if (bias.dtype != DType::kI32 || bias.ElementCount() != g.out_channels || bias.rank() != 1) {
      return InvalidArgument("QLinearConv {}: B {} must be int32 [{}]", ctx.node, bias.ToString(),
                             g.out_channels);
    }
  }
  DType out = DType::kU8;
  if (ctx.input(7).present()) {
    KILN_RETURN_IF_ERROR(CheckInt8(ctx, 7, "y_zero_point"));
    out = ctx.input(7).type->dtype;
  }
  return OneOutput(TensorType{out, g.OutputDims()});
}

double QConvFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  const size_t w = ctx.op_type == "ConvInteger" ? 1 : 3;
  const TensorType& wt = *ctx.input(w).type;
  if (outputs.empty() || wt.dims.empty()) return 0;
  return 2.0 * static_cast<double>(outputs[0].ElementCount()) *
         static_cast<double>(wt.ElementCount() / wt.dims[0]);
}

TensorOpDef Def(const char* name, int min_in, int max_in, Expected<ShapeResult> (*infer)(const ShapeContext&),
                int outputs = 1) {
  TensorOpDef d;
  d.op_type = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.min_outputs = d.max_outputs = outputs;
  d.infer = infer;
  return d;
}

}  // namespace

void AddQuantOpDefs(std::vector<TensorOpDef>* ops) {
  ops->push_back(Def("QuantizeLinear", 2, 3, InferQuantize));
  ops->push_back(Def("DequantizeLinear", 2, 3, InferDequantize));
  ops->push_back(Def("DynamicQuantizeLinear", 1, 1, InferDynamicQuantize, 3));
  TensorOpDef mmi = Def("MatMulInteger", 2, 4, InferMatMulInteger);
  mmi.flops = QMatMulFlops;
  ops->push_back(mmi);
  TensorOpDef qmm = Def("QLinearMatMul", 8, 8, InferQLinearMatMul);
  qmm.flops = QMatMulFlops;
  ops->push_back(qmm);
  TensorOpDef fused = Def("kiln.QLinearMatMul", 6, 9, InferQLinearMatMul);
  fused.flops = QMatMulFlops;
  ops->push_back(fused);
  TensorOpDef ci = Def("ConvInteger", 2, 4, InferConvInteger);
  ci.flops = QConvFlops;
  ops->push_back(ci);
  TensorOpDef qc = Def("QLinearConv", 8, 9, InferQLinearConv);
  qc.flops = QConvFlops;
  ops->push_back(qc);
}

}  // namespace kiln
