// ReduceMean over axes 2 and 3 of nchw16c activations (blocked_spatial_mean.cc).
#pragma once

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

bool SpatialMeanTakesLayout(TensorLayout layout, const TensorKernelArgs& args);
Expected<TensorKernel> MakeBlockedSpatialMean(const TensorKernelArgs& args);

}  // namespace kiln::cpu
