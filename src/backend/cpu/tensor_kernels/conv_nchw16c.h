// kiln's own convolutions on nchw16c activations (channels in blocks of 16,
// zero-padded; see blocked_layout.h), for the two shapes of MobileNet- and
// ShuffleNet-style networks where oneDNN's blocked kernels are slow on small
// layers: the 1x1 convolution (a GEMM over channel blocks) and the depthwise
// one (k*k vector FMAs per pixel over the 16 lanes of a block); and a
// network's stem, a dense convolution of few input channels (RGB) that reads
// its input row-major (or nchw16c) and writes nchw16c, so that a chain can
// start at it (each input value broadcast against the 16 output channels of
// a block, several output pixels per register tile); and the dense 3x3
// convolution of ResNet-style networks (conv_nchw16c_dense_avx512.cc). All
// fuse bias, kiln.FusedConv's activation and residual, and write zeros to
// the padding lanes. The vector kernels are AVX-512 (the layout is used only
// there); the reference loops below compute the same from the same packed
// weights, for the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "backend/cpu/tensor_kernels/laid_out_floats.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"
#include "graph/tensor_ops/fused_activation.h"

namespace kiln::cpu {

enum class BlockedConvShape { kNone, kPointwise, kDepthwise, kStem, kDense3x3 };

// The most input channels a stem convolution has (RGBA).
inline constexpr int64_t kStemMaxInChannels = 4;

// Which of kiln's nchw16c kernels takes g: pointwise = 2-d, group 1, 1x1
// kernel, stride 1 or 2, no pads; depthwise = 2-d, group == C == M, dilation
// 1, any kernel, stride and pads; stem = 2-d, group 1, at most
// kStemMaxInChannels input channels, a kernel larger than 1x1, dilation 1,
// any stride and pads; dense 3x3 = 2-d, group 1, more than
// kStemMaxInChannels input channels, a 3x3 kernel, dilation 1, stride 1 or
// 2 (the same on both axes), any pads. kNone elsewhere and below AVX-512.
BlockedConvShape KilnBlockedConvShape(const Window3& g, Isa isa);

// Whether kiln's nchw16c kernel beats oneDNN's on g when run on `threads`
// threads (the figures are in conv_nchw16c.cc).
bool PreferKilnBlockedConv(const Window3& g, Isa isa, int threads);

// Whether kiln's stem kernel beats oneDNN's nchw -> nChw16c kernel on the
// stem g reading a row-major input (the figures are in conv_nchw16c.cc).
bool PreferKilnStem(const Window3& g);

// The weights and epilogue, packed once: pointwise [MB][CB][16 in][16 out],
// depthwise [CB][kh][kw][16], stem [MB][C][kh][kw][16], dense 3x3
// [MB][CB][3][3][16 in][16 out]; bias [MB x 16];
// padded channels zero. input_row_major (stems only): the input is NCHW as
// its dims say rather than nchw16c.
struct BlockedConvPlan {
  Window3 g;
  BlockedConvShape shape = BlockedConvShape::kNone;
  FusedEpilogue epilogue;
  int64_t in_blocks = 0, out_blocks = 0;
  bool input_row_major = false;
  LaidOutFloats weights;  // slot's stored ones where it has them
  std::vector<float> bias;
};

// REQUIRES: shape is what KilnBlockedConvShape(g, Isa::kAvx512) says.
// w [M, C/group, kh, kw]; bias may be null.
BlockedConvPlan MakeBlockedConvPlan(const Window3& g, BlockedConvShape shape, const FusedEpilogue& epilogue,
                                    const float* w, const float* bias, bool input_row_major = false,
                                    const LaidOutSlot& slot = {});

// The plain loops (any machine); residual may be null.
void RunBlockedConvReference(const BlockedConvPlan& plan, const float* x, const float* residual, float* y);

// The scratch the AVX-512 kernels take for `threads` threads (stems: a
// buffer of padded input rows per thread; dense 3x3: one zero-padded copy
// of the input, shared; others none).
int64_t BlockedConvScratchFloats(const BlockedConvPlan& plan, int threads);

// The AVX-512 kernels (conv_nchw16c_avx512.cc); pool may be null. scratch:
// BlockedConvScratchFloats(plan, scratch_threads) floats, or null (a stem
// then allocates its own and runs on the caller alone); a pool larger than
// scratch_threads runs on the caller alone.
void RunBlockedConvAvx512(const BlockedConvPlan& plan, const float* x, const float* residual, float* y,
                          ThreadPool* pool, float* scratch = nullptr, int scratch_threads = 1);

// The dense 3x3 loop (conv_nchw16c_dense_avx512.cc), which
// RunBlockedConvAvx512 calls. padded: BlockedDense3x3PaddedFloats(plan)
// floats, or null (then allocated here).
int64_t BlockedDense3x3PaddedFloats(const BlockedConvPlan& plan);
void RunBlockedDense3x3Avx512(const BlockedConvPlan& plan, const float* x, const float* residual, float* y,
                              ThreadPool* pool, float* padded);

// The kernel for Conv / kiln.FusedConv with activation_layout = nchw16c.
// input_row_major: the node's attribute input_layout = "row-major" (a stem).
TensorKernel MakeKilnBlockedConvKernel(const Window3& g, BlockedConvShape shape,
                                       const FusedEpilogue& epilogue, const float* w, const float* bias,
                                       bool has_residual, bool input_row_major = false, int threads = 1,
                                       const LaidOutSlot& slot = {});

}  // namespace kiln::cpu
