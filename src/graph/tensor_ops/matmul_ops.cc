// Shape inference of the matrix products: MatMul (numpy-style batched, 1-d
// operands as ONNX defines them), Gemm and Einsum; and kiln.FusedMatMul,
// the fused form of MatMul followed by the Add of a bias row:
//
//   kiln.FusedMatMul(A, B, [bias]) -> Y = MatMul(A, B) + bias
//   bias: f32 with N elements (shape [N], or [1, ..., 1, N]), added to
//   every row. A and B as MatMul takes them (f32). Attribute trans_b (int,
//   default 0): 1 when B is given as [..., N, K] (attention's K, with no
//   Transpose before the product).
#include "graph/tensor_ops/einsum_equation.h"
#include "graph/tensor_ops/matmul_shape.h"
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

bool IsMatMulDType(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kI32 || t == DType::kI64;
}

Expected<ShapeResult> InferMatMul(const ShapeContext& ctx) {
  const TensorType& a = *ctx.input(0).type;
  const TensorType& b = *ctx.input(1).type;
  if (a.dtype != b.dtype) {
    return InvalidArgument("{} {}: operand dtypes {} and {} differ", ctx.op_type, ctx.node,
                           DTypeName(a.dtype), DTypeName(b.dtype));
  }
  if (!IsMatMulDType(a.dtype))
    return InvalidArgument("{} {}: dtype {} is not a number type MatMul takes", ctx.op_type, ctx.node,
                           DTypeName(a.dtype));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> b_dims, MatMulBDims(ctx.op_type, ctx.a(), b.dims));
  KILN_ASSIGN_OR_RETURN(MatMulShape s, MatMulShapeOf(ctx.op_type, ctx.node, a.dims, b_dims));
  if (ctx.input(2).present()) {
    const TensorType& bias = *ctx.input(2).type;
    bool row =
        bias.dtype == a.dtype && bias.ElementCount() == s.n && (bias.dims.empty() || bias.dims.back() == s.n);
    if (!row) {
      return InvalidArgument("{} {}: bias {} must be {} with the {} output columns as its last axis",
                             ctx.op_type, ctx.node, bias.ToString(), DTypeName(a.dtype), s.n);
    }
  }
  return OneOutput(TensorType{a.dtype, s.out_dims});
}

double MatMulFlops(const ShapeContext& ctx, const std::vector<TensorType>&) {
  auto b_dims = MatMulBDims(ctx.op_type, ctx.a(), ctx.input(1).type->dims);
  if (!b_dims.ok()) return 0;
  auto s = MatMulShapeOf(ctx.op_type, ctx.node, ctx.input(0).type->dims, *b_dims);
  if (!s.ok()) return 0;
  return 2.0 * static_cast<double>(s->batch) * static_cast<double>(s->m) * static_cast<double>(s->n) *
         static_cast<double>(s->k);
}

Expected<ShapeResult> InferGemm(const ShapeContext& ctx) {
  const TensorType& a = *ctx.input(0).type;
  const TensorType& b = *ctx.input(1).type;
  if (a.rank() != 2 || b.rank() != 2) {
    return InvalidArgument("Gemm {}: A and B must be 2-d, got [{}] and [{}]", ctx.node, DimsToString(a.dims),
                           DimsToString(b.dims));
  }
  if (a.dtype != b.dtype) {
    return InvalidArgument("Gemm {}: A is {} and B is {}", ctx.node, DTypeName(a.dtype), DTypeName(b.dtype));
  }
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, CheckedIntAttrOr(ctx.a(), "transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, CheckedIntAttrOr(ctx.a(), "transB", 0));
  const int64_t m = trans_a ? a.dims[1] : a.dims[0], ka = trans_a ? a.dims[0] : a.dims[1];
  const int64_t kb = trans_b ? b.dims[1] : b.dims[0], n = trans_b ? b.dims[0] : b.dims[1];
  if (ka != kb) {
    return InvalidArgument("Gemm {}: inner dimensions do not match: A{} [{}] gives K={}, B{} [{}] gives K={}",
                           ctx.node, trans_a ? "^T" : "", DimsToString(a.dims), ka, trans_b ? "^T" : "",
                           DimsToString(b.dims), kb);
  }
  if (ctx.input(2).present()) {
    const TensorType& c = *ctx.input(2).type;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> bc, BroadcastDims(ctx, c.dims, {m, n}));
    if (c.rank() > 2 || bc != std::vector<int64_t>{m, n}) {
      return InvalidArgument("Gemm {}: C [{}] does not broadcast to [{}, {}]", ctx.node, DimsToString(c.dims),
                             m, n);
    }
    if (c.dtype != a.dtype)
      return InvalidArgument("Gemm {}: C is {}, A is {}", ctx.node, DTypeName(c.dtype), DTypeName(a.dtype));
  }
  return OneOutput(TensorType{a.dtype, {m, n}});
}

double GemmFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  const TensorType& a = *ctx.input(0).type;
  if (a.rank() != 2 || outputs.empty()) return 0;
  auto trans_attr = CheckedIntAttrOr(ctx.a(), "transA", 0);
  const bool trans_a = trans_attr.ok() && *trans_attr != 0;
  const double k = static_cast<double>(trans_a ? a.dims[0] : a.dims[1]);
  return 2.0 * k * static_cast<double>(outputs[0].ElementCount());
}

Expected<EinsumEquation> EquationOf(const ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string equation, ctx.a().String("equation"));
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.input(i).present()) return InvalidArgument("Einsum {}: input {} is omitted", ctx.node, i);
    dims.push_back(ctx.input(i).type->dims);
  }
  return ParseEinsum(ctx.node, equation, dims);
}

Expected<ShapeResult> InferEinsum(const ShapeContext& ctx) {
  const DType dtype = ctx.input(0).type->dtype;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (ctx.input(i).present() && ctx.input(i).type->dtype != dtype) {
      return InvalidArgument("Einsum {}: input {} is {}, input 0 is {}", ctx.node, i,
                             DTypeName(ctx.input(i).type->dtype), DTypeName(dtype));
    }
  }
  KILN_ASSIGN_OR_RETURN(EinsumEquation eq, EquationOf(ctx));
  return OneOutput(TensorType{dtype, eq.OutputDims()});
}

double EinsumFlops(const ShapeContext& ctx, const std::vector<TensorType>&) {
  auto eq = EquationOf(ctx);
  if (!eq.ok()) return 0;
  double n = 1;
  for (int64_t s : eq->size) n *= s > 0 ? static_cast<double>(s) : 1.0;
  return n * static_cast<double>(eq->inputs.size());
}

}  // namespace

void AddMatMulOpDefs(std::vector<TensorOpDef>* ops) {
  TensorOpDef matmul;
  matmul.op_type = "MatMul";
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.infer = InferMatMul;
  matmul.flops = MatMulFlops;
  ops->push_back(matmul);

  TensorOpDef fused = matmul;
  fused.op_type = "kiln.FusedMatMul";
  fused.max_inputs = 3;
  ops->push_back(fused);

  TensorOpDef gemm;
  gemm.op_type = "Gemm";
  gemm.min_inputs = 2;
  gemm.max_inputs = 3;
  gemm.infer = InferGemm;
  gemm.flops = GemmFlops;
  ops->push_back(gemm);

  TensorOpDef einsum;
  einsum.op_type = "Einsum";
  einsum.min_inputs = 1;
  einsum.max_inputs = 64;
  einsum.infer = InferEinsum;
  einsum.flops = EinsumFlops;
  ops->push_back(einsum);
}

}  // namespace kiln
