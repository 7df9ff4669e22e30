// The CPU's Einsum: a two-operand fp32 product whose labels sort into batch,
// row, column and contracted axes runs as a batched matmul on the packed
// linear kernels (operands transposed into place where needed, a constant
// operand packed once at bind time); every other equation (one operand,
// diagonals, more operands, other dtypes) runs the plain loop over all
// labels.
#pragma once

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

Expected<TensorKernel> MakeEinsum(const TensorKernelArgs& args);

// The plain loop's kernel whatever the equation (tests compare with it).
Expected<TensorKernel> MakeEinsumReference(const TensorKernelArgs& args);

}  // namespace kiln::cpu
