// The vector code of kiln's own 2-d convolution for any Simd traits S
// (SimdAvx2, SimdAvx512): the register-tile GEMM with its fused epilogue,
// the im2col gather, and the depthwise loop. See conv2d_plan.h for the
// layouts. Include only from files compiled with the ISA's flags
// (conv2d_avx2.cc, conv2d_avx512.cc, conv_nchw16c_avx512.cc).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/kernels/simd_math.h"
#include "backend/cpu/tensor_kernels/conv2d_plan.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

template <class S>
inline typename S::V ConvActivate(const FusedEpilogue& e, typename S::V v) {
  using V = typename S::V;
  switch (e.activation) {
    case FusedActivation::kNone: return v;
    case FusedActivation::kRelu: return S::Max(v, S::Zero());
    case FusedActivation::kLeakyRelu: return S::Select(S::Less(v, S::Zero()), S::Mul(v, S::Set1(e.alpha)), v);
    case FusedActivation::kClip: return S::Min(S::Max(v, S::Set1(e.alpha)), S::Set1(e.beta));
    case FusedActivation::kHardSigmoid:
      return S::Min(S::Max(S::Fma(v, S::Set1(e.alpha), S::Set1(e.beta)), S::Zero()), S::Set1(1.0f));
    case FusedActivation::kHardSwish: {
      const V gate =
          S::Min(S::Max(S::Add(S::Div(v, S::Set1(6.0f)), S::Set1(0.5f)), S::Zero()), S::Set1(1.0f));
      return S::Mul(v, gate);
    }
    case FusedActivation::kSilu: return VecSilu<S>(v);
    case FusedActivation::kSigmoid:
      return S::Div(S::Set1(1.0f), S::Add(S::Set1(1.0f), VecExp<S>(S::Sub(S::Zero(), v))));
    case FusedActivation::kTanh: return VecTanh<S>(v);
  }
  return v;
}

// Bias, residual and activation on a finished vector of `lanes` outputs.
template <class S>
inline typename S::V ConvFinish(const FusedEpilogue& e, typename S::V v, float bias, const float* residual,
                                int lanes) {
  v = S::Add(v, S::Set1(bias));
  if (residual == nullptr) return ConvActivate<S>(e, v);
  const auto r = lanes == S::kLanes ? S::Load(residual) : S::LoadPart(residual, lanes);
  if (e.residual_before_activation) return ConvActivate<S>(e, S::Add(v, r));
  return S::Add(ConvActivate<S>(e, v), r);
}

// C[MR x n_valid] (+)= A panel [kc][MR] * B [kc rows of NV whole vectors,
// ldb apart]; on the last K block also the epilogue. Rows past m_valid and
// columns past n_valid are computed (zeros in A and B there) but not stored.
template <class S, int MR, int NV>
void ConvTile(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m_valid,
              int n_valid, bool first, bool last, const float* bias, const float* residual,
              const FusedEpilogue& e) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = S::Zero();
  }
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = S::Load(b + k * ldb + v * L);
    const float* ak = a + k * MR;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V av = S::Set1(ak[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = S::Fma(av, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < m_valid; ++r) {
    for (int v = 0; v < NV; ++v) {
      const int lanes = std::clamp(n_valid - v * L, 0, L);
      if (lanes == 0) break;
      float* cp = c + r * ldc + v * L;
      V out = acc[r][v];
      if (!first) out = S::Add(out, lanes == L ? S::Load(cp) : S::LoadPart(cp, lanes));
      if (last)
        out =
            ConvFinish<S>(e, out, bias[r], residual != nullptr ? residual + r * ldc + v * L : nullptr, lanes);
      if (lanes == L) {
        S::Store(cp, out);
      } else {
        S::StorePart(cp, out, lanes);
      }
    }
  }
}

template <class S, int MR, int NV, size_t... I>
auto TileTable(std::index_sequence<I...>) {
  using Tile = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, int, int, bool, bool,
                        const float*, const float*, const FusedEpilogue&);
  return std::array<Tile, NV>{&ConvTile<S, MR, static_cast<int>(I) + 1>...};
}

// The tile of MR rows and `vectors` (1..NV) vectors of pixels.
template <class S, int MR, int NV>
auto TileForVectors(int vectors) {
  static const auto table = TileTable<S, MR, NV>(std::make_index_sequence<NV>());
  return table[static_cast<size_t>(vectors - 1)];
}

// d[t] = src[2 t] for t < n, with vector deinterleaves where two whole
// vectors of src lie within its `avail` readable elements.
template <class S>
inline void CopyEvenElements(float* d, const float* src, int64_t n, int64_t avail) {
  constexpr int L = S::kLanes;
  int64_t t = 0;
  if constexpr (L == 16) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (; t + L <= n && 2 * (t + L) <= avail; t += L) {
      const __m512 a = _mm512_loadu_ps(src + 2 * t), b = _mm512_loadu_ps(src + 2 * t + L);
      _mm512_storeu_ps(d + t, _mm512_permutex2var_ps(a, even, b));
    }
  } else if constexpr (L == 8) {
    for (; t + L <= n && 2 * (t + L) <= avail; t += L) {
      const __m256 a = _mm256_loadu_ps(src + 2 * t), b = _mm256_loadu_ps(src + 2 * t + L);
      // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]
      const __m256 pairs = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
      _mm256_storeu_ps(d + t, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs), 0xd8)));
    }
  }
  for (; t < n; ++t) d[t] = src[2 * t];
}

// Rows k0 .. k0+kc of one group's im2col matrix, columns (output pixels)
// n0 .. n0+ncols, into dst (rows ld apart). Zeros where a tap falls in the pad.
// (A template on S only so that each ISA's copy stays its own.)
template <class S>
void GatherIm2col(const Window3& g, const float* xg, int64_t k0, int64_t kc, int64_t n0, int64_t ncols,
                  float* dst, int64_t ld) {
  const int64_t kh = g.kernel[1], kw = g.kernel[2], H = g.in[1], W = g.in[2], OW = g.out[2];
  const int64_t sh = g.stride[1], sw = g.stride[2];
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t k = k0 + kk;
    const int64_t ch = k / (kh * kw), tap = k % (kh * kw), ki = tap / kw, kj = tap % kw;
    const float* xc = xg + ch * H * W;
    float* d = dst + kk * ld;
    int64_t n = n0, oh = n0 / OW, ow = n0 % OW;
    while (n < n0 + ncols) {
      const int64_t run = std::min(OW - ow, n0 + ncols - n);
      const int64_t ih = oh * sh - g.pad_begin[1] + ki * g.dilation[1];
      if (ih < 0 || ih >= H) {
        std::memset(d, 0, sizeof(float) * static_cast<size_t>(run));
      } else {
        const float* row = xc + ih * W;
        const int64_t iw0 = ow * sw - g.pad_begin[2] + kj * g.dilation[2];
        // Outputs t in [lo, hi) read inside the row.
        int64_t lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
        int64_t hi = iw0 >= W ? 0 : (W - iw0 + sw - 1) / sw;
        lo = std::min(lo, run);
        hi = std::clamp(hi, lo, run);
        for (int64_t t = 0; t < lo; ++t) d[t] = 0.0f;
        if (sw == 1) {
          std::memcpy(d + lo, row + iw0 + lo, sizeof(float) * static_cast<size_t>(hi - lo));
        } else if (sw == 2) {
          CopyEvenElements<S>(d + lo, row + iw0 + 2 * lo, hi - lo, W - (iw0 + 2 * lo));
        } else {
          for (int64_t t = lo; t < hi; ++t) d[t] = row[iw0 + t * sw];
        }
        for (int64_t t = hi; t < run; ++t) d[t] = 0.0f;
      }
      d += run;
      n += run;
      ow = 0;
      ++oh;
    }
  }
}

// One NR-wide panel of the im2col matrix: rows k0 .. k0+kc, pixels
// n0 .. n0+ncols (ncols <= NR), k-major, columns past ncols zero, so that
// tiles always load whole vectors and stream the panel in order.
template <class S, int NR>
void GatherPanel(const Window3& g, const float* xg, int64_t k0, int64_t kc, int64_t n0, int64_t ncols,
                 float* dst) {
  for (int64_t kk = 0; kk < kc; ++kk) {
    float* d = dst + kk * NR;
    GatherIm2col<S>(g, xg, k0 + kk, 1, n0, ncols, d, NR);
    if (ncols < NR) std::memset(d + ncols, 0, sizeof(float) * static_cast<size_t>(NR - ncols));
  }
}

template <class S, int MR, int NV>
void RunConvGemm(const ConvPlan& p, const float* x, const float* residual, float* y, float* scratch,
                 ThreadPool* pool) {
  constexpr int NR = NV * S::kLanes;
  const Window3& g = p.g;
  const int64_t P = g.OutPixels(), in_pixels = g.InPixels();
  const int64_t mg = g.GroupOut(), cg = g.GroupIn();
  const int64_t n_blocks = (P + p.nc - 1) / p.nc;
  const int64_t n_panels = (P + NR - 1) / NR;  // per group, over all pixels
  const int64_t m_blocks = p.m_blocks, panels_per_block = p.panels_per_block;
  const int64_t items = g.group * n_blocks * m_blocks;
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xn = x + n * g.in_channels * in_pixels;
    float* yn = y + n * g.out_channels * P;
    const float* rn = residual != nullptr ? residual + n * g.out_channels * P : nullptr;
    if (p.shared_im2col) {
      // Every group's whole im2col matrix, as panels [group][pixel panel][K][NR],
      // the panels split over the threads.
      auto gather = [&](int64_t begin, int64_t end, int) {
        for (int64_t panel = begin; panel < end; ++panel) {
          const int64_t grp = panel / n_panels, j0 = (panel % n_panels) * NR;
          GatherPanel<S, NR>(g, xn + grp * cg * in_pixels, 0, p.k, j0, std::min<int64_t>(NR, P - j0),
                             scratch + panel * p.k * NR);
        }
      };
      if (pool != nullptr) {
        pool->ParallelFor(g.group * n_panels, 1, gather);
      } else {
        gather(0, g.group * n_panels, 0);
      }
    }
    auto body = [&](int64_t begin, int64_t end, int thread) {
      float* panels_buf = scratch + p.scratch_floats_shared + thread * p.scratch_floats_per_thread;
      for (int64_t item = begin; item < end; ++item) {
        const int64_t grp = item / (n_blocks * m_blocks), rest = item % (n_blocks * m_blocks);
        const int64_t n0 = (rest / m_blocks) * p.nc, ncols = std::min(p.nc, P - n0);
        const int64_t mp0 = (rest % m_blocks) * panels_per_block;
        const int64_t mp1 = std::min(p.m_panels, mp0 + panels_per_block);
        const float* xg = xn + grp * cg * in_pixels;
        for (int64_t k0 = 0; k0 < p.k; k0 += p.kc) {
          const int64_t kc = std::min(p.kc, p.k - k0);
          // B as NR-wide panels of kc rows, panel_stride apart.
          const float* b = panels_buf;
          int64_t panel_stride = kc * NR;
          if (p.shared_im2col) {
            b = scratch + ((grp * n_panels + n0 / NR) * p.k + k0) * NR;
            panel_stride = p.k * NR;
          } else {
            for (int64_t j0 = 0; j0 < ncols; j0 += NR) {
              // Whole panels of a 1x1 convolution are read in place.
              if (p.identity_im2col && ncols - j0 >= NR) continue;
              GatherPanel<S, NR>(g, xg, k0, kc, n0 + j0, std::min<int64_t>(NR, ncols - j0),
                                 panels_buf + (j0 / NR) * panel_stride);
            }
          }
          for (int64_t j0 = 0; j0 < ncols; j0 += NR) {
            const int nv = static_cast<int>(std::min<int64_t>(NR, ncols - j0));
            const bool in_place = !p.shared_im2col && p.identity_im2col && nv == NR;
            const float* bj = in_place ? xg + k0 * P + n0 + j0 : b + (j0 / NR) * panel_stride;
            const int64_t ldb = in_place ? P : NR;
            // A narrower tile for the last pixels of a block (7x7 images: 48 + 1).
            const auto tile = TileForVectors<S, MR, NV>((nv + S::kLanes - 1) / S::kLanes);
            for (int64_t mp = mp0; mp < mp1; ++mp) {
              const int64_t m_first = mp * MR;
              const int m_valid = static_cast<int>(std::min<int64_t>(MR, mg - m_first));
              const int64_t c_offset = (grp * mg + m_first) * P + n0 + j0;
              tile(kc, p.packed_w.data() + ((grp * p.m_panels + mp) * p.k + k0) * MR, bj, ldb, yn + c_offset,
                   P, m_valid, nv, k0 == 0, k0 + kc == p.k, p.bias.data() + grp * mg + m_first,
                   rn != nullptr ? rn + c_offset : nullptr, p.epilogue);
            }
          }
        }
      }
    };
    if (pool != nullptr) {
      pool->ParallelFor(items, 1, body);
    } else {
      body(0, items, 0);
    }
  }
}

template <class S>
void RunConvDepthwise(const ConvPlan& p, const float* x, const float* residual, float* y, float* scratch,
                      ThreadPool* pool) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  constexpr int kVectors = 4;  // independent accumulators per step
  const Window3& g = p.g;
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t kh = g.kernel[1], kw = g.kernel[2], taps = kh * kw;
  const int64_t s = g.stride[2], phase_w = p.nc;
  const int64_t padded_h = H + g.pad_begin[1] + g.pad_end[1];
  const int64_t planes = g.batch * g.out_channels;
  // Where tap (ki, kj) reads, from an output row's start in the phase-split plane.
  std::vector<int64_t> tap_offset(static_cast<size_t>(taps));
  for (int64_t ki = 0; ki < kh; ++ki) {
    for (int64_t kj = 0; kj < kw; ++kj) {
      const int64_t t = kj * g.dilation[2];
      tap_offset[static_cast<size_t>(ki * kw + kj)] =
          ki * g.dilation[1] * s * phase_w + (t % s) * phase_w + t / s;
    }
  }
  auto body = [&](int64_t begin, int64_t end, int thread) {
    float* buf = scratch + thread * p.scratch_floats_per_thread;
    // Zeros once per range: every plane writes the same (interior) places,
    // so the pads and the slack stay zero from plane to plane.
    std::memset(buf, 0, sizeof(float) * static_cast<size_t>(padded_h * s * phase_w));
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t ch = plane % g.out_channels;
      const float* xp = x + plane * H * W;
      for (int64_t ih = 0; ih < H; ++ih) {
        float* row = buf + (ih + g.pad_begin[1]) * s * phase_w;
        const float* src = xp + ih * W;
        if (s == 1) {
          std::memcpy(row + g.pad_begin[2], src, sizeof(float) * static_cast<size_t>(W));
          continue;
        }
        if (s == 2) {
          // Even and odd input columns to their phases in one pass (a
          // deinterleave the compiler vectorizes).
          const int64_t c0 = g.pad_begin[2];
          float* even_dst = row + (c0 % 2) * phase_w + c0 / 2;
          float* odd_dst = row + ((c0 + 1) % 2) * phase_w + (c0 + 1) / 2;
          const int64_t pairs = W / 2;
          for (int64_t t = 0; t < pairs; ++t) {
            even_dst[t] = src[2 * t];
            odd_dst[t] = src[2 * t + 1];
          }
          if (W % 2 != 0) even_dst[pairs] = src[W - 1];
          continue;
        }
        // Phase q holds padded columns j * s + q, i.e. input columns
        // j * s + q - pad; written contiguously, read with stride s.
        for (int64_t q = 0; q < s; ++q) {
          const int64_t shift = q - g.pad_begin[2];
          const int64_t j_lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
          const int64_t j_hi = W - 1 - shift < 0 ? 0 : (W - 1 - shift) / s + 1;
          float* dst = row + q * phase_w;
          for (int64_t j = j_lo; j < j_hi; ++j) dst[j] = src[j * s + shift];
        }
      }
      const float* wp = p.packed_w.data() + ch * taps;
      const float bias = p.bias[static_cast<size_t>(ch)];
      float* yp = y + plane * OH * OW;
      const float* rp = residual != nullptr ? residual + plane * OH * OW : nullptr;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow0 = 0; ow0 < OW; ow0 += kVectors * L) {
          V acc[kVectors];
          for (int v = 0; v < kVectors; ++v) acc[v] = S::Zero();
          const float* base = buf + oh * g.stride[1] * s * phase_w + ow0;
          for (int64_t tap = 0; tap < taps; ++tap) {
            const float* src = base + tap_offset[static_cast<size_t>(tap)];
            const V wv = S::Set1(wp[tap]);
#pragma GCC unroll 4
            for (int v = 0; v < kVectors; ++v) acc[v] = S::Fma(wv, S::Load(src + v * L), acc[v]);
          }
          for (int v = 0; v < kVectors; ++v) {
            const int64_t at = ow0 + v * L;
            const int lanes = static_cast<int>(std::clamp<int64_t>(OW - at, 0, L));
            if (lanes == 0) break;
            const int64_t yi = oh * OW + at;
            const V out = ConvFinish<S>(p.epilogue, acc[v], bias, rp != nullptr ? rp + yi : nullptr, lanes);
            if (lanes == L) {
              S::Store(yp + yi, out);
            } else {
              S::StorePart(yp + yi, out, lanes);
            }
          }
        }
      }
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(planes, 1, body);
  } else {
    body(0, planes, 0);
  }
}

template <class S, int MR, int NV>
void RunConvPlanWith(const ConvPlan& plan, const float* x, const float* residual, float* y, float* scratch,
                     ThreadPool* pool) {
  if (plan.path == ConvPath::kDepthwise) {
    RunConvDepthwise<S>(plan, x, residual, y, scratch, pool);
  } else {
    RunConvGemm<S, MR, NV>(plan, x, residual, y, scratch, pool);
  }
}

}  // namespace kiln::cpu
