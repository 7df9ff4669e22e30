// kiln's own convolutions on nchw16c activations (channels in blocks of 16,
// zero-padded; see blocked_layout.h), for the two shapes of MobileNet- and
// ShuffleNet-style networks where oneDNN's blocked kernels are slow on small
// layers: the 1x1 convolution (a GEMM over channel blocks) and the depthwise
// one (k*k vector FMAs per pixel over the 16 lanes of a block). Both fuse
// bias, kiln.FusedConv's activation and residual, and write zeros to the
// padding lanes. The vector kernels are AVX-512 (the layout is used only
// there); the reference loops below compute the same from the same packed
// weights, for the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"
#include "graph/tensor_ops/fused_activation.h"

namespace kiln::cpu {

enum class BlockedConvShape { kNone, kPointwise, kDepthwise };

// Which of kiln's nchw16c kernels takes g: pointwise = 2-d, group 1, 1x1
// kernel, stride 1 or 2, no pads; depthwise = 2-d, group == C == M, dilation
// 1, any kernel, stride and pads. kNone elsewhere and below AVX-512.
BlockedConvShape KilnBlockedConvShape(const Window3& g, Isa isa);

// Whether kiln's nchw16c kernel beats oneDNN's on g when run on `threads`
// threads (the figures are in conv_nchw16c.cc).
bool PreferKilnBlockedConv(const Window3& g, Isa isa, int threads);

// The weights and epilogue, packed once: pointwise [MB][CB][16 in][16 out],
// depthwise [CB][kh][kw][16]; bias [MB x 16]; padded channels zero.
struct BlockedConvPlan {
  Window3 g;
  BlockedConvShape shape = BlockedConvShape::kNone;
  FusedEpilogue epilogue;
  int64_t in_blocks = 0, out_blocks = 0;
  std::vector<float> weights, bias;
};

// REQUIRES: shape is what KilnBlockedConvShape(g, Isa::kAvx512) says.
// w [M, C/group, kh, kw]; bias may be null.
BlockedConvPlan MakeBlockedConvPlan(const Window3& g, BlockedConvShape shape, const FusedEpilogue& epilogue,
                                    const float* w, const float* bias);

// The plain loops (any machine); residual may be null.
void RunBlockedConvReference(const BlockedConvPlan& plan, const float* x, const float* residual, float* y);

// The AVX-512 kernels (conv_nchw16c_avx512.cc); pool may be null.
void RunBlockedConvAvx512(const BlockedConvPlan& plan, const float* x, const float* residual, float* y,
                          ThreadPool* pool);

// The kernel for Conv / kiln.FusedConv with activation_layout = nchw16c.
TensorKernel MakeKilnBlockedConvKernel(const Window3& g, BlockedConvShape shape,
                                       const FusedEpilogue& epilogue, const float* w, const float* bias,
                                       bool has_residual);

}  // namespace kiln::cpu
