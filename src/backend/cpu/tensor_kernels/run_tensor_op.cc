// One op on compile-time tensors.
#include "backend/cpu/tensor_kernels/run_tensor_op.h"

#include <cstdlib>
#include <memory>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_op.h"

namespace kiln::cpu {
namespace {

// The tensors here are as big as their dims say: blocked activations fit
// them only when no channel is padding (nchw16c with C a multiple of 16).
Status CheckBuffersHoldLayout(const TensorOpRun& run, const std::vector<TensorType>& outputs) {
  if (!run.attrs.Has("activation_layout")) return Status::Ok();
  auto layout = run.attrs.String("activation_layout");
  if (!layout.ok() || *layout != TensorLayoutName(TensorLayout::kNCHW16c)) return Status::Ok();
  std::vector<TensorType> types = outputs;
  for (const auto& in : run.inputs) {
    if (in) types.push_back(in->type());
  }
  for (const TensorType& t : types) {
    if (t.rank() == 4 && t.dims[1] % 16 != 0) {
      return Unsupported(
          "{} {}: nchw16c activations of {} channels need padded buffers, which tensors run one op at a time "
          "do not have",
          run.op_type, run.node, t.dims[1]);
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<std::vector<TensorData>> RunTensorOp(const TensorOpRun& run) {
  ShapeContext ctx;
  ctx.op_type = run.op_type;
  ctx.node = run.node;
  ctx.attrs = &run.attrs;
  ctx.num_outputs = run.num_outputs;
  ctx.opset = run.opset;
  for (const auto& in : run.inputs) {
    ctx.inputs.push_back(in ? TensorOpInput{&in->type(), &*in} : TensorOpInput{});
  }
  KILN_ASSIGN_OR_RETURN(ShapeResult shapes, InferTensorOp(ctx));
  KILN_RETURN_IF_ERROR(CheckBuffersHoldLayout(run, shapes.outputs));

  TensorKernelArgs args;
  args.op_type = run.op_type;
  args.node = run.node;
  args.attrs = &run.attrs;
  args.outputs = shapes.outputs;
  args.opset = run.opset;
  for (const auto& in : run.inputs) {
    args.inputs.push_back(in ? in->type() : TensorType{});
    args.present.push_back(in.has_value());
    args.constants.push_back(in && run.inputs_are_constants ? &*in : nullptr);
  }
  KILN_ASSIGN_OR_RETURN(TensorKernel kernel, MakeTensorKernel(args));

  std::vector<std::shared_ptr<std::string>> out_bytes;
  std::vector<void*> out_ptrs;
  for (const TensorType& t : shapes.outputs) {
    // 64 spare bytes so that an empty output still has an address.
    out_bytes.push_back(std::make_shared<std::string>(t.Bytes() + 64, '\0'));
    out_ptrs.push_back(out_bytes.back()->data());
  }
  std::vector<const void*> in_ptrs;
  for (const auto& in : run.inputs) in_ptrs.push_back(in ? in->data() : nullptr);
  std::unique_ptr<uint8_t, decltype(&std::free)> scratch(
      static_cast<uint8_t*>(std::aligned_alloc(64, (kernel.scratch_bytes + 63) / 64 * 64 + 64)), &std::free);
  TensorCall call;
  call.inputs = in_ptrs.data();
  call.outputs = out_ptrs.data();
  call.scratch = scratch.get();
  call.pool = run.pool;
  KILN_RETURN_IF_ERROR(kernel.run(call));

  std::vector<TensorData> outputs;
  for (size_t i = 0; i < shapes.outputs.size(); ++i) {
    out_bytes[i]->resize(shapes.outputs[i].Bytes());
    outputs.emplace_back(shapes.outputs[i], out_bytes[i]);
  }
  return outputs;
}

}  // namespace kiln::cpu
