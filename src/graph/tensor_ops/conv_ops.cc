// Shape inference of the convolution and pooling ops: Conv, ConvTranspose,
// the pools, and kiln's fused form kiln.FusedConv (a Conv with an
// activation and an optional residual input). MatMul, Gemm and Einsum
// register in mm_ops.cc.
#include "graph/tensor_ops/conv_geometry.h"
#include "graph/tensor_ops/fused_activation.h"
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

Status CheckFloat(const ShapeContext& ctx, const TensorType& t, const char* what) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16) {
    return InvalidArgument("{} {}: the {} is {}, a float type is needed", ctx.op_type, ctx.node, what,
                           DTypeName(t.dtype));
  }
  return Status::Ok();
}

Status CheckBias(const ShapeContext& ctx, const WindowGeometry& g) {
  TensorOpInput b = ctx.input(2);
  if (!b.present()) return Status::Ok();
  if (b.type->dims != std::vector<int64_t>{g.out_channels}) {
    return InvalidArgument("{} {}: bias [{}] is not [{}] (one per output channel)", ctx.op_type, ctx.node,
                           DimsToString(b.type->dims), g.out_channels);
  }
  return Status::Ok();
}

Expected<WindowGeometry> ConvOf(const ShapeContext& ctx) {
  const TensorType& x = *ctx.input(0).type;
  const TensorType& w = *ctx.input(1).type;
  KILN_RETURN_IF_ERROR(CheckFloat(ctx, x, "input"));
  if (w.dtype != x.dtype) {
    return InvalidArgument("{} {}: weight is {}, input {}", ctx.op_type, ctx.node, DTypeName(w.dtype),
                           DTypeName(x.dtype));
  }
  if (ctx.op_type == "ConvTranspose")
    return ConvTransposeGeometry(ctx.op_type, ctx.node, ctx.a(), x.dims, w.dims);
  return ConvGeometry(ctx.op_type, ctx.node, ctx.a(), x.dims, w.dims);
}

Expected<ShapeResult> InferConv(const ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, ConvOf(ctx));
  KILN_RETURN_IF_ERROR(CheckBias(ctx, g));
  TensorType out{ctx.input(0).type->dtype, g.OutputDims()};
  if (ctx.op_type == "kiln.FusedConv") {
    KILN_RETURN_IF_ERROR(ParseFusedEpilogue(ctx.op_type, ctx.node, ctx.a()).status());
    TensorOpInput r = ctx.input(3);
    if (r.present() && *r.type != out) {
      return InvalidArgument("{} {}: residual {} is not the output's {}", ctx.op_type, ctx.node,
                             r.type->ToString(), out.ToString());
    }
  }
  return OneOutput(out);
}

double ConvFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  (void)outputs;
  auto g = ConvOf(ctx);
  if (!g.ok()) return 0.0;
  // Multiply and add per tap; ConvTranspose's taps run over its input.
  const double pixels = ctx.op_type == "ConvTranspose" ? static_cast<double>(g->InPixels())
                                                       : static_cast<double>(g->OutPixels());
  const double per_pixel =
      ctx.op_type == "ConvTranspose"
          ? static_cast<double>(g->in_channels) * static_cast<double>(g->out_channels / g->group)
          : static_cast<double>(g->out_channels) * static_cast<double>(g->in_channels / g->group);
  return 2.0 * static_cast<double>(g->batch) * pixels * per_pixel * static_cast<double>(g->KernelTaps());
}

Expected<ShapeResult> InferPool(const ShapeContext& ctx) {
  const TensorType& x = *ctx.input(0).type;
  // MaxPool also takes 8-bit integers (opset 12).
  const bool max_of_bytes = ctx.op_type == "MaxPool" && (x.dtype == DType::kU8 || x.dtype == DType::kI8);
  if (!max_of_bytes) KILN_RETURN_IF_ERROR(CheckFloat(ctx, x, "input"));
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, PoolGeometry(ctx.op_type, ctx.node, ctx.a(), x.dims));
  const int64_t storage_order = IntAttrOr(ctx.a(), "storage_order", 0);
  if (storage_order != 0 && storage_order != 1) {
    return InvalidArgument("{} {}: storage_order {} is neither 0 nor 1", ctx.op_type, ctx.node,
                           storage_order);
  }
  ShapeResult r = OneOutput(TensorType{x.dtype, g.OutputDims()});
  if (ctx.num_outputs > 1) r.outputs.push_back(TensorType{DType::kI64, g.OutputDims()});
  return r;
}

double PoolFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  auto g = PoolGeometry(ctx.op_type, ctx.node, ctx.a(), ctx.input(0).type->dims);
  if (!g.ok() || outputs.empty()) return 0.0;
  return static_cast<double>(outputs[0].ElementCount()) * static_cast<double>(g->KernelTaps());
}

Expected<ShapeResult> InferGlobalPool(const ShapeContext& ctx) {
  const TensorType& x = *ctx.input(0).type;
  KILN_RETURN_IF_ERROR(CheckFloat(ctx, x, "input"));
  if (x.rank() < 3) {
    return InvalidArgument("{} {}: input [{}] needs a batch, a channel and a spatial axis", ctx.op_type,
                           ctx.node, DimsToString(x.dims));
  }
  std::vector<int64_t> dims(x.dims.size(), 1);
  dims[0] = x.dims[0];
  dims[1] = x.dims[1];
  return OneOutput(TensorType{x.dtype, dims});
}

double GlobalPoolFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  (void)outputs;
  return static_cast<double>(ctx.input(0).type->ElementCount());
}

TensorOpDef Def(const char* name, int min_in, int max_in, int max_out,
                Expected<ShapeResult> (*infer)(const ShapeContext&),
                double (*flops)(const ShapeContext&, const std::vector<TensorType>&)) {
  TensorOpDef d;
  d.op_type = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.max_outputs = max_out;
  d.infer = infer;
  d.flops = flops;
  return d;
}

}  // namespace

void AddConvOpDefs(std::vector<TensorOpDef>* ops) {
  ops->push_back(Def("Conv", 2, 3, 1, InferConv, ConvFlops));
  // x, w, optional bias, optional residual (the output's shape).
  ops->push_back(Def("kiln.FusedConv", 2, 4, 1, InferConv, ConvFlops));
  ops->push_back(Def("ConvTranspose", 2, 3, 1, InferConv, ConvFlops));
  ops->push_back(Def("MaxPool", 1, 1, 2, InferPool, PoolFlops));
  ops->push_back(Def("AveragePool", 1, 1, 1, InferPool, PoolFlops));
  ops->push_back(Def("LpPool", 1, 1, 1, InferPool, PoolFlops));
  ops->push_back(Def("GlobalAveragePool", 1, 1, 1, InferGlobalPool, GlobalPoolFlops));
  ops->push_back(Def("GlobalMaxPool", 1, 1, 1, InferGlobalPool, GlobalPoolFlops));
  ops->push_back(Def("GlobalLpPool", 1, 1, 1, InferGlobalPool, GlobalPoolFlops));
}

}  // namespace kiln
