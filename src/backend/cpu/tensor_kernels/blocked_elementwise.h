// Internal: the elementwise kernels on nchw16c activations (see
// blocked_layout.h), which the elementwise factories hand a node to when
// its activation_layout says nchw16c.
#pragma once

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// Unary f32 maps (and Clip): the row-major kernel `row_major` made for the
// padded buffer, then the padding set back to zero where f(0) may not be 0.
bool UnaryTakesLayout(TensorLayout layout, const TensorKernelArgs& args);
Expected<TensorKernel> MakeBlockedUnary(const TensorKernelArgs& args, TensorKernelFactory row_major);

// Add, Sub, Mul, Div on f32: operands of the output's dims, per-channel
// ([N|1, C, 1, 1] blocked, or a constant of any broadcastable shape, which
// is packed when the kernel is made) or single values.
bool BinaryTakesLayout(TensorLayout layout, const TensorKernelArgs& args);
Expected<TensorKernel> MakeBlockedBinary(const TensorKernelArgs& args);

}  // namespace kiln::cpu
