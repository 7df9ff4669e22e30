// The CPU's kernel of kiln.Reorder (graph/tensor_ops/layout_ops.cc): the
// plane loops where one side is row-major and the elements are 4 bytes,
// the element-by-element reference otherwise.
#include "backend/cpu/tensor_kernels/layout_reorder.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {
namespace {

Expected<TensorKernel> MakeReorder(const TensorKernelArgs& args) {
  TensorLayout from = TensorLayout::kRowMajor, to = TensorLayout::kRowMajor;
  auto from_name = args.a().String("from");
  auto to_name = args.a().String("to");
  if (!from_name.ok() || !to_name.ok() || !ParseTensorLayout(*from_name, &from) ||
      !ParseTensorLayout(*to_name, &to)) {
    return InvalidArgument("{} {}: attributes from and to must each be one of row-major, nhwc, nchw16c",
                           args.op_type, args.node);
  }
  if (ElementBytes(args.inputs[0].dtype) == 0) {
    return Unsupported("{} {}: dtype {} not supported", args.op_type, args.node,
                       DTypeName(args.inputs[0].dtype));
  }
  const TensorType type = args.inputs[0];
  TensorKernel k;
  const bool fast = ElementBytes(type.dtype) == 4 && type.rank() == 4 && from != to &&
                    (from == TensorLayout::kRowMajor || to == TensorLayout::kRowMajor);
  k.impl = fast ? "kiln-planes" : "reference";
  k.run = [type, from, to](const TensorCall& call) {
    if (!FastReorder(type, from, to, call.inputs[0], call.outputs[0], call.pool)) {
      ReferenceReorder(type, from, to, call.inputs[0], call.outputs[0]);
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace

void AddLayoutKernels(std::vector<TensorKernelEntry>* kernels) {
  kernels->push_back({"kiln.Reorder",
                      MakeReorder,
                      {DType::kF32, DType::kF16, DType::kI32, DType::kI64, DType::kU8, DType::kBool},
                      "4-d between row-major, nhwc and nchw16c",
                      nullptr});
}

}  // namespace kiln::cpu
