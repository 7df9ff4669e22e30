// The CPU's pooling kernels: MaxPool (with its optional Indices output),
// AveragePool, LpPool and the global pools, 1-d to 3-d, f32.
#pragma once

#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// Registers the pools (called by AddConvKernels).
void AddPoolKernels(std::vector<TensorKernelEntry>* kernels);

}  // namespace kiln::cpu
