// The CPU's elementwise tensor kernels.
#include <algorithm>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {
namespace {

Expected<TensorKernel> MakeRelu(const TensorKernelArgs& args) {
  if (args.inputs[0].dtype != DType::kF32) return Unsupported("dtype {} (f32 only)", DTypeName(args.inputs[0].dtype));
  const int64_t n = args.outputs[0].ElementCount();
  TensorKernel k;
  k.impl = "reference";
  k.run = [n](const TensorCall& call) {
    const auto* x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
    return Status::Ok();
  };
  return k;
}

}  // namespace

void AddElementwiseKernels(std::vector<TensorKernelEntry>* kernels) {
  kernels->push_back({"Relu", MakeRelu, {DType::kF32}, ""});
}

}  // namespace kiln::cpu
