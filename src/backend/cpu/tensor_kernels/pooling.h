// The CPU's pooling kernels: MaxPool (with its optional Indices output),
// AveragePool, LpPool and the global pools, 1-d to 3-d, f32; MaxPool,
// AveragePool and the global max and average pools on nchw16c too.
#pragma once

#include <vector>

#include "backend/cpu/tensor_kernels/blocked_pool_loops.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// Registers the pools (called by AddConvKernels).
void AddPoolKernels(std::vector<TensorKernelEntry>* kernels);

// The window of output index o along axis (0 to 2) of g, clipped to the input.
BlockedPoolTaps PoolAxisTaps(const Window3& g, int axis, int64_t o);

// The pools on nchw16c activations (blocked_pooling.cc), which the pool
// factories hand a node to when its activation_layout says nchw16c.
bool PoolTakesLayout(TensorLayout layout, const TensorKernelArgs& args);
bool GlobalPoolTakesLayout(TensorLayout layout, const TensorKernelArgs& args);
Expected<TensorKernel> MakeBlockedPool(const TensorKernelArgs& args);
Expected<TensorKernel> MakeBlockedGlobalPool(const TensorKernelArgs& args);

}  // namespace kiln::cpu
