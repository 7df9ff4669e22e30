// The direct path of kiln's 2-d convolution (see conv2d_plan.h) for Simd
// traits S: the phase-split padded copy of the input, and register tiles of
// MR output channels x NV vectors of consecutive virtual pixels whose every
// tap is a contiguous load, so that no im2col matrix is gathered. Include
// only from files compiled with the ISA's flags (conv2d_avx2.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/tensor_kernels/conv2d_plan.h"
#include "backend/cpu/tensor_kernels/conv2d_simd.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

// Channels [c0, c1) of one image into the zero-padded, stride-phase-split
// planes: sub-plane (r, t) of a channel holds padded pixel (q * sh + r,
// j * sw + t) at q * phase_w + j.
template <class S>
void FillPhasePlanes(const ConvPlan& p, const float* x, int64_t c0, int64_t c1, float* buf) {
  const Window3& g = p.g;
  const int64_t H = g.in[1], W = g.in[2], sh = g.stride[1], sw = g.stride[2];
  const int64_t sub_plane = p.phase_h * p.phase_w;
  for (int64_t c = c0; c < c1; ++c) {
    float* plane = buf + c * p.channel_stride;
    std::memset(plane, 0, sizeof(float) * static_cast<size_t>(p.channel_stride));
    const float* xc = x + c * H * W;
    for (int64_t ih = 0; ih < H; ++ih) {
      const int64_t row = ih + g.pad_begin[1];
      const float* src = xc + ih * W;
      for (int64_t t = 0; t < sw; ++t) {
        // Input columns iw = j * sw + t - pad for j in [j_lo, j_hi).
        const int64_t shift = t - g.pad_begin[2];
        const int64_t j_lo = shift >= 0 ? 0 : (-shift + sw - 1) / sw;
        const int64_t j_hi = W - 1 - shift < 0 ? 0 : (W - 1 - shift) / sw + 1;
        if (j_hi <= j_lo) continue;
        float* dst = plane + ((row % sh) * sw + t) * sub_plane + (row / sh) * p.phase_w;
        const float* first = src + j_lo * sw + shift;
        if (sw == 1) {
          std::memcpy(dst + j_lo, first, sizeof(float) * static_cast<size_t>(j_hi - j_lo));
        } else if (sw == 2) {
          CopyEvenElements<S>(dst + j_lo, first, j_hi - j_lo, W - (j_lo * sw + shift));
        } else {
          for (int64_t j = j_lo; j < j_hi; ++j) dst[j] = src[j * sw + shift];
        }
      }
    }
  }
}

// One tile over one block of `channels` channels: MR output channels
// (packed panel a, [channel][tap][MR], at the block's first channel) x NV
// vectors of virtual pixels starting at b in the phase-split input (at the
// block's first channel, channels channel_stride apart). The sums start from
// `partial` (null: zero); where `partial_out` is given they go there,
// otherwise the epilogue runs and the pixels that are real (oh < OH,
// ow < OW) are stored.
template <class S, int MR, int NV>
void DirectTile(const ConvPlan& p, const float* a, const float* b, int64_t channel_stride, int64_t channels,
                const float* partial, float* partial_out, int64_t p0, float* y, const float* residual,
                int m_valid, const float* bias) {
  using V = typename S::V;
  constexpr int L = S::kLanes, NR = NV * L;
  const Window3& g = p.g;
  const int64_t taps = static_cast<int64_t>(p.tap_offsets.size());
  const int64_t* offsets = p.tap_offsets.data();
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = partial != nullptr ? S::Load(partial + r * NR + v * L) : S::Zero();
  }
  for (int64_t c = 0; c < channels; ++c) {
    const float* bc = b + c * channel_stride;
    for (int64_t t = 0; t < taps; ++t) {
      const float* bt = bc + offsets[t];
      V bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = S::Load(bt + v * L);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const V av = S::Set1(a[r]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = S::Fma(av, bv[v], acc[r][v]);
      }
      a += MR;
    }
  }
  if (partial_out != nullptr) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) S::Store(partial_out + r * NR + v * L, acc[r][v]);
    }
    return;
  }
  const int64_t OH = g.out[1], OW = g.out[2], P = OH * OW, pitch = p.phase_w;
  const int64_t oh0 = p0 / pitch, ow0 = p0 % pitch;
  if (ow0 + NR <= OW) {
    // The whole tile is one output row's run.
    const int64_t at = oh0 * OW + ow0;
    for (int r = 0; r < m_valid; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const int64_t i = r * P + at + v * L;
        S::Store(y + i, ConvFinish<S>(p.epilogue, acc[r][v], bias[r],
                                      residual != nullptr ? residual + i : nullptr, L));
      }
    }
    return;
  }
  // Rows end inside the tile: through a buffer, run by run.
  alignas(64) float sums[MR][NR];
  for (int r = 0; r < m_valid; ++r) {
    for (int v = 0; v < NV; ++v) S::Store(&sums[r][v * L], acc[r][v]);
  }
  for (int64_t q = 0; q < NR;) {
    const int64_t oh = (p0 + q) / pitch, ow = (p0 + q) % pitch;
    if (oh >= OH) break;
    if (ow >= OW) {
      q += pitch - ow;  // the dropped columns
      continue;
    }
    const int64_t run = std::min(OW - ow, NR - q), at = oh * OW + ow;
    for (int r = 0; r < m_valid; ++r) {
      for (int64_t u = 0; u < run; u += L) {
        const int lanes = static_cast<int>(std::min<int64_t>(L, run - u));
        const int64_t i = r * P + at + u;
        const V out = ConvFinish<S>(p.epilogue, S::LoadPart(&sums[r][q + u], lanes), bias[r],
                                    residual != nullptr ? residual + i : nullptr, lanes);
        S::StorePart(y + i, out, lanes);
      }
    }
    q += run;
  }
}

template <class S, int MR, int NV>
void RunConvDirect(const ConvPlan& p, const float* x, const float* residual, float* y, float* scratch,
                   ThreadPool* pool) {
  constexpr int NR = NV * S::kLanes;
  const Window3& g = p.g;
  const int64_t C = g.in_channels, M = g.out_channels, P = g.OutPixels(), in_pixels = g.InPixels();
  const int64_t chunks = (p.tiles + p.tiles_per_chunk - 1) / p.tiles_per_chunk;
  const int64_t units = chunks * p.m_blocks;
  const int64_t taps = static_cast<int64_t>(p.tap_offsets.size());
  const int64_t virtual_pixels = (g.out[1] - 1) * p.phase_w + g.out[2];
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xn = x + n * C * in_pixels;
    float* yn = y + n * M * P;
    const float* rn = residual != nullptr ? residual + n * M * P : nullptr;
    auto fill = [&](int64_t begin, int64_t end, int) { FillPhasePlanes<S>(p, xn, begin, end, scratch); };
    if (pool != nullptr) {
      pool->ParallelFor(C, 1, fill);
    } else {
      fill(0, C, 0);
    }
    // The slack past the last plane: whole-vector loads of dropped pixels.
    const int64_t filled = C * p.channel_stride;
    std::memset(scratch + filled, 0, sizeof(float) * static_cast<size_t>(p.scratch_floats_shared - filled));
    // Units: (chunk of tiles, block of m panels), chunk-major; inside one,
    // channel block by channel block, each tile under each m panel (the
    // tile's input in L1, the unit's weights in L2).
    auto body = [&](int64_t begin, int64_t end, int thread) {
      float* partials = scratch + p.scratch_floats_shared + thread * p.scratch_floats_per_thread;
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t chunk = unit / p.m_blocks, mb = unit % p.m_blocks;
        const int64_t t0 = chunk * p.tiles_per_chunk, t1 = std::min(p.tiles, t0 + p.tiles_per_chunk);
        const int64_t mp0 = mb * p.panels_per_block, mp1 = std::min(p.m_panels, mp0 + p.panels_per_block);
        for (int64_t c0 = 0; c0 < C; c0 += p.channels_per_block) {
          const int64_t channels = std::min(p.channels_per_block, C - c0);
          const bool first = c0 == 0, last = c0 + channels == C;
          for (int64_t tile = t0; tile < t1; ++tile) {
            const int64_t p0 = tile * NR;
            const float* b = scratch + c0 * p.channel_stride + p0;
            for (int64_t mp = mp0; mp < mp1; ++mp) {
              const int64_t m0 = mp * MR;
              const int m_valid = static_cast<int>(std::min<int64_t>(MR, M - m0));
              const float* a = p.packed_w.data() + (mp * p.k + c0 * taps) * MR;
              float* partial = partials + ((tile - t0) * p.panels_per_block + (mp - mp0)) * MR * NR;
              // The last tile at one vector where that covers it (7x7 images).
              auto tile_fn =
                  p0 + S::kLanes >= virtual_pixels ? &DirectTile<S, MR, 1> : &DirectTile<S, MR, NV>;
              tile_fn(p, a, b, p.channel_stride, channels, first ? nullptr : partial,
                      last ? nullptr : partial, p0, yn + m0 * P, rn != nullptr ? rn + m0 * P : nullptr,
                      m_valid, p.bias.data() + m0);
            }
          }
        }
      }
    };
    if (pool != nullptr) {
      pool->ParallelFor(units, 1, body);
    } else {
      body(0, units, 0);
    }
  }
}

}  // namespace kiln::cpu
