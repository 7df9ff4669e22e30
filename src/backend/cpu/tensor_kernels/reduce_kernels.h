// Internal: the factories of the reduce family's kernels, which
// reduce_kernels.cc registers.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// A tensor seen as [outer, axis, inner] around one axis (or a run of axes).
struct AxisView {
  int64_t outer = 1;
  int64_t axis = 1;
  int64_t inner = 1;
};
// The view around dims [begin, end) of `dims`.
AxisView ViewAround(const std::vector<int64_t>& dims, int64_t begin, int64_t end);

// ReduceSum ... ReduceSumSquare, by args.op_type.
Expected<TensorKernel> MakeReduceKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeArgReduceKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeCumSumKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeTopKKernel(const TensorKernelArgs& args);
// Softmax, LogSoftmax, Hardmax.
Expected<TensorKernel> MakeSoftmaxKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeLayerNormKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeBatchNormKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeInstanceNormKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeGroupNormKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeLpNormKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeMvnKernel(const TensorKernelArgs& args);

}  // namespace kiln::cpu
