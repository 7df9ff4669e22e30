// kiln's own fp32 2-d convolution (1-d runs as height 1): how a node's
// convolution is laid out for the vector kernels, decided and packed once
// when the kernel is made, and the per-ISA entry points that run it.
//
// Two paths:
// - GEMM: per group, Y[M/g, pixels] = W[M/g, K] * im2col(X)[K, pixels] with
//   K = C/g * kh * kw. The weights are packed in panels of mr output
//   channels (k-major inside a panel, zero rows past M/g); the im2col
//   matrix is gathered per (K block x pixel block) into a thread's scratch
//   as panels of nr pixels (k-major, zero columns past the pixels), so that
//   a tile streams both operands contiguously. A register tile of mr
//   channels x nr pixels accumulates over K and applies bias, residual and
//   activation before its one store.
// - depthwise (one input and one output channel per group): per plane, the
//   input is copied once into a zero-padded, stride-phase-split scratch
//   plane, so that every tap of every output row is a contiguous vector load.
// - direct (AVX2, one group, not 1x1 stride 1; conv2d_direct_simd.h): no
//   im2col. The input is copied once per call into zero-padded,
//   stride-phase-split planes, rows phase_w apart, in which output pixel
//   (oh, ow) of tap (ki, kj) reads
//   oh * phase_w + ow + tap_offsets[tap]. Tiles of nr consecutive "virtual"
//   pixels p = oh * phase_w + ow are then contiguous vector loads for every
//   tap and channel (the phase_w - OW columns past each row are computed and
//   dropped). Blocked over channels as a GEMM over K, so that the input a
//   tile reads stays in L1 while the m panels' weights stream past it.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "backend/cpu/tensor_kernels/laid_out_floats.h"
#include "graph/tensor_ops/fused_activation.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

enum class ConvPath { kGemm, kDepthwise, kDirect };

// The AVX-512 register tile: 6 output channels x 4 vectors of 16 pixels
// (24 of the 32 registers accumulate; 6 broadcasts and 4 loads feed 24
// FMAs per k). Measured best of 8x3, 12x2, 6x4 on Zen 4. AVX2: 6 x 2
// vectors of 8.
inline constexpr int kAvx512Mr = 6;
inline constexpr int kAvx512Nv = 4;
// The AVX2 direct path's tile (conv2d_direct_simd.h): 6 channels x 2
// vectors of 8 pixels (measured against 4 x 3; 3 x 4 spills).
inline constexpr int kAvx2DirectMr = 6;
inline constexpr int kAvx2DirectNv = 2;
inline constexpr int kAvx2DirectNr = kAvx2DirectNv * 8;

struct ConvPlan {
  Window3 g;  // g.in[0] == g.out[0] == g.kernel[0] == 1
  FusedEpilogue epilogue;
  Isa isa = Isa::kAvx2;
  ConvPath path = ConvPath::kGemm;
  int mr = 0;            // output channels per register tile (GEMM)
  int nr = 0;            // pixels per register tile
  int64_t k = 0;         // C/g * kh * kw
  int64_t m_panels = 0;  // panels of mr rows per group
  int64_t kc = 0;        // K block
  int64_t nc = 0;        // pixel block
  // Work split: pixel blocks x blocks of m panels per group. When the
  // channels are split (few pixels), the whole im2col matrix is gathered
  // once into shared scratch first, instead of once per channel block.
  int64_t m_blocks = 1;
  int64_t panels_per_block = 0;
  bool shared_im2col = false;
  // 1x1, stride 1, no pad: the im2col matrix is the input itself, so whole
  // pixel panels are read from it in place (rows P apart) instead of copied.
  bool identity_im2col = false;
  // Direct: the phase-split input's geometry, per-tap read offsets, and the
  // work split into units of (chunk of tiles_per_chunk tiles, block of
  // panels_per_block m panels), each run channel block by channel block.
  int64_t phase_h = 0, phase_w = 0;
  int64_t channel_stride = 0;  // floats per channel in the phase-split input
  std::vector<int64_t> tap_offsets;
  int64_t tiles = 0, tiles_per_chunk = 0, channels_per_block = 0;
  LaidOutFloats packed_w;  // GEMM, direct: [group][panel][k][mr]; depthwise: [M][kh*kw]
  std::vector<float> bias;      // [M], zeros when the node has none
  int64_t scratch_floats_per_thread = 0;
  int64_t scratch_floats_shared = 0;  // before the per-thread parts
  // Scratch floats for a pool of `threads`.
  int64_t ScratchFloats(int threads) const {
    return scratch_floats_shared + scratch_floats_per_thread * threads;
  }
};

// Whether the vector paths take this geometry (2-d or 1-d, and an ISA with
// vectors); the rest runs the reference.
bool ConvPlanApplies(const Window3& g, Isa isa);

// Decides the path and blocking and packs w [M, C/g, kh, kw] (and bias, may
// be null) for `isa`; the packed weights are `slot`'s stored ones where it
// has them (then w is not read), and recorded in it otherwise.
ConvPlan MakeConvPlan(const Window3& g, const FusedEpilogue& epilogue, const float* w, const float* bias,
                      Isa isa, int threads, const LaidOutSlot& slot = {});

// Runs the plan on one call: x [N, C, H, W] -> y [N, M, OH, OW]; residual
// (the output's shape) may be null. scratch holds ScratchFloats(threads)
// floats for a pool of at most `threads` (the plan's) threads.
void RunConvPlan(const ConvPlan& plan, const float* x, const float* residual, float* y, float* scratch,
                 ThreadPool* pool);

// Whether the direct path (above) takes this geometry on `isa`.
bool ConvDirectApplies(const Window3& g, Isa isa);

// The per-ISA implementations (conv2d_avx2.cc, conv2d_avx512.cc).
namespace avx2 {
void RunConvPlan(const ConvPlan& plan, const float* x, const float* residual, float* y, float* scratch,
                 ThreadPool* pool);
}
namespace avx512 {
void RunConvPlan(const ConvPlan& plan, const float* x, const float* residual, float* y, float* scratch,
                 ThreadPool* pool);
}

}  // namespace kiln::cpu
