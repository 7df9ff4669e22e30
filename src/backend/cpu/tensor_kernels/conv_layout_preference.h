// Where the CPU wants a convolution's activations blocked: the layout
// stage starts an nchw16c chain only at a convolution whose fast path is
// oneDNN's nChw16c kernels, so that everything row-major otherwise (AVX2,
// small layers, depthwise) keeps kiln's own kernels.
#pragma once

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// True for a 2-d Conv / kiln.FusedConv that PreferOneDnnBlocked picks on
// this machine (AVX-512, dense, big enough) and that KILN_CONV does not
// force onto another implementation.
bool ConvPrefersBlockedActivations(const TensorKernelArgs& args);

}  // namespace kiln::cpu
