// Internal: the factories of the elementwise kernels, by kind, which
// elementwise_kernels.cc registers.
#pragma once

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// Unary maps (Abs ... Mish, Identity, IsNaN, IsInf, Not, BitwiseNot), by args.op_type.
Expected<TensorKernel> MakeUnaryKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeClipKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeDropoutKernel(const TensorKernelArgs& args);
// Binary ops with broadcasting (Add ... BitShift, comparisons, logic), by args.op_type.
Expected<TensorKernel> MakeBinaryKernel(const TensorKernelArgs& args);
// Min, Max, Sum, Mean over any number of inputs.
Expected<TensorKernel> MakeVariadicKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakeWhereKernel(const TensorKernelArgs& args);
Expected<TensorKernel> MakePReluKernel(const TensorKernelArgs& args);
// Cast and CastLike (the output type says the target).
Expected<TensorKernel> MakeCastKernel(const TensorKernelArgs& args);

}  // namespace kiln::cpu
