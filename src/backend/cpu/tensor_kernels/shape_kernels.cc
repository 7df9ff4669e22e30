// The CPU's tensor kernels of the shape family: views and re-layouts
// (Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand,
// Tile, DepthToSpace, SpaceToDepth). The other groups live beside this
// file (shape_kernels_*.cc).
#include <cstring>
#include <memory>

#include "backend/cpu/tensor_kernels/shape_kernel_groups.h"
#include "backend/cpu/tensor_kernels/shape_kernel_params.h"
#include "backend/cpu/tensor_kernels/strided_copy.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_op.h"

namespace kiln::cpu::shape_kernels {

using namespace ::kiln::shape_ops;  // the parameters these kernels share with shape inference

namespace {

// Shape and Size: the value shape inference computed, written out.
Expected<TensorKernel> MakeShapeValue(const TensorKernelArgs& args) {
  ShapeContext ctx;
  ctx.op_type = args.op_type;
  ctx.node = args.node;
  ctx.attrs = args.attrs;
  ctx.inputs.push_back(TensorOpInput{&args.inputs[0], nullptr});
  KILN_ASSIGN_OR_RETURN(ShapeResult r, InferTensorOp(ctx));
  if (r.constants.empty() || !r.constants[0])
    return Internal("{} {}: no value inferred", args.op_type, args.node);
  auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(r.constants[0]->data()),
                                             r.constants[0]->bytes());
  TensorKernel k;
  k.impl = "constant";
  k.run = [bytes](const TensorCall& call) {
    std::memcpy(call.outputs[0], bytes->data(), bytes->size());
    return Status::Ok();
  };
  return k;
}

// Reshape, Flatten, Squeeze, Unsqueeze: the same bytes under new dims.
Expected<TensorKernel> MakeSameBytes(const TensorKernelArgs& args) {
  const size_t bytes = args.outputs[0].Bytes();
  TensorKernel k;
  k.impl = "memcpy";
  k.run = [bytes](const TensorCall& call) {
    if (call.outputs[0] != call.inputs[0]) ParallelMemcpy(call.outputs[0], call.inputs[0], bytes, call.pool);
    return Status::Ok();
  };
  return k;
}

}  // namespace

TensorKernel StridedCopyKernel(StridedCopySpec spec) {
  TensorKernel k;
  k.impl = "strided-copy";
  k.run = [spec = std::move(spec)](const TensorCall& call) {
    StridedCopy(spec, static_cast<const uint8_t*>(call.inputs[0]), static_cast<uint8_t*>(call.outputs[0]),
                call.pool);
    return Status::Ok();
  };
  return k;
}

namespace {

Expected<TensorKernel> MakeTranspose(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KernelParams params(args);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                        ResolvePermutation(params.AtBind(), args.inputs[0].rank()));
  const std::vector<int64_t> in_strides = ContiguousStrides(args.inputs[0].dims);
  StridedCopySpec spec;
  spec.elem_bytes = elem;
  spec.dims = args.outputs[0].dims;
  for (int64_t p : perm) spec.src_strides.push_back(in_strides[static_cast<size_t>(p)]);
  spec.dst_strides = ContiguousStrides(spec.dims);
  return StridedCopyKernel(std::move(spec));
}

// Expand: numpy broadcasting of the input to the output's dims.
Expected<TensorKernel> MakeExpand(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  const std::vector<int64_t>& in = args.inputs[0].dims;
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  StridedCopySpec spec;
  spec.elem_bytes = elem;
  spec.dims = args.outputs[0].dims;
  const size_t lead = spec.dims.size() - in.size();
  for (size_t a = 0; a < spec.dims.size(); ++a) {
    const bool broadcast = a < lead || in[a - lead] == 1;
    spec.src_strides.push_back(broadcast ? 0 : in_strides[a - lead]);
  }
  spec.dst_strides = ContiguousStrides(spec.dims);
  return StridedCopyKernel(std::move(spec));
}

// Tile: each axis d becomes (repeat, d) with the repeat reading stride 0.
Expected<TensorKernel> MakeTile(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  const std::vector<int64_t>& in = args.inputs[0].dims;
  const std::vector<int64_t>& out = args.outputs[0].dims;
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  const std::vector<int64_t> out_strides = ContiguousStrides(out);
  StridedCopySpec spec;
  spec.elem_bytes = elem;
  for (size_t a = 0; a < in.size(); ++a) {
    const int64_t repeats = in[a] == 0 ? 0 : out[a] / in[a];
    spec.dims.push_back(repeats);
    spec.src_strides.push_back(0);
    spec.dst_strides.push_back(in[a] * out_strides[a]);
    spec.dims.push_back(in[a]);
    spec.src_strides.push_back(in_strides[a]);
    spec.dst_strides.push_back(out_strides[a]);
  }
  return StridedCopyKernel(std::move(spec));
}

// DepthToSpace and SpaceToDepth as one strided copy in the output's order.
Expected<TensorKernel> MakeBlockRearrange(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KernelParams params(args);
  KILN_ASSIGN_OR_RETURN(BlockParams bp, ResolveBlock(params.AtBind()));
  const std::vector<int64_t>& in = args.inputs[0].dims;
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3], b = bp.block;
  StridedCopySpec spec;
  spec.elem_bytes = elem;
  if (args.op_type == "DepthToSpace") {
    const int64_t co = c / (b * b);
    const int64_t s_n = c * h * w;
    // Where the two block coordinates and the output channel sit in the input's channels.
    const int64_t s_c = bp.crd ? b * b * h * w : h * w;
    const int64_t s_b1 = bp.crd ? b * h * w : b * co * h * w;
    const int64_t s_b2 = bp.crd ? h * w : co * h * w;
    spec.dims = {n, co, h, b, w, b};
    spec.src_strides = {s_n, s_c, w, s_b1, 1, s_b2};
  } else {
    const int64_t ho = h / b, wo = w / b;
    spec.dims = {n, b, b, c, ho, wo};
    spec.src_strides = {c * h * w, w, 1, h * w, b * w, b};
  }
  spec.dst_strides = ContiguousStrides(spec.dims);
  return StridedCopyKernel(std::move(spec));
}

}  // namespace

void AddShapeViewKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::vector<DType>& any = MovableDTypes();
  kernels->push_back({"Shape", MakeShapeValue, any, ""});
  kernels->push_back({"Size", MakeShapeValue, any, ""});
  kernels->push_back({"Reshape", MakeSameBytes, any, "shape known at compile time"});
  kernels->push_back({"Flatten", MakeSameBytes, any, ""});
  kernels->push_back({"Squeeze", MakeSameBytes, any, "axes known at compile time"});
  kernels->push_back({"Unsqueeze", MakeSameBytes, any, "axes known at compile time"});
  kernels->push_back({"Transpose", MakeTranspose, any, ""});
  kernels->push_back({"Expand", MakeExpand, any, "shape known at compile time"});
  kernels->push_back({"Tile", MakeTile, any, "repeats known at compile time"});
  kernels->push_back({"DepthToSpace", MakeBlockRearrange, any, "4-d; DCR|CRD"});
  kernels->push_back({"SpaceToDepth", MakeBlockRearrange, any, "4-d"});
}

}  // namespace kiln::cpu::shape_kernels

namespace kiln::cpu {

void AddShapeKernels(std::vector<TensorKernelEntry>* kernels) {
  shape_kernels::AddShapeViewKernels(kernels);
  shape_kernels::AddShapeSelectKernels(kernels);
  shape_kernels::AddShapeGenerateKernels(kernels);
  shape_kernels::AddResizeKernels(kernels);
}

}  // namespace kiln::cpu
