// Where the CPU wants a convolution's activations blocked: the layout
// stage starts an nchw16c chain only at a convolution whose fast path is
// blocked - oneDNN's nChw16c kernels (dense, big enough) or kiln's own
// nchw16c depthwise kernel (conv_nchw16c.h) - so that everything row-major
// otherwise (AVX2, small dense layers) keeps kiln's row-major kernels.
#pragma once

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// True for a 2-d Conv / kiln.FusedConv that PreferOneDnnBlocked picks on
// this machine (AVX-512, dense, big enough), or a depthwise one on AVX-512
// (on an image larger than 1x1), and that KILN_CONV does not force onto
// another implementation.
bool ConvPrefersBlockedActivations(const TensorKernelArgs& args);

// True for a stem convolution (few input channels, conv_nchw16c.h's kStem),
// which runs reading its input row-major and writing nchw16c (oneDNN's jit
// kernel, or kiln's stem kernel), so that the chain starts at the stem with
// no reorder before it.
bool ConvReadsRowMajorInput(const TensorKernelArgs& args);

}  // namespace kiln::cpu
