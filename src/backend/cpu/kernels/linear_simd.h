// The linear kernel y = x W^T (+ bias) for any Simd traits S, on weights
// packed in panels of 16 output rows (packed_weight.h).
//
// Determinism: every y[m, n] is one fp32 FMA chain over k = 0, 1, ..., K-1
// starting from zero, then plus bias[n]. Tiles only choose which chains run
// side by side; cache blocking along k stores a partial chain in y and picks
// it up again, which keeps the order. So the result is the same whatever M,
// the tile shapes or the thread split, and equals the scalar reference.
//
// Everything here is a template on S or has internal linkage, so that the
// AVX-512 instantiation can never stand in for the AVX2 one at link time.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_table.h"

namespace kiln::cpu {
namespace linear_detail {

// Rows from which the cache-blocked path (weights converted to fp32 once per
// block and reused by every row tile) beats streaming the weights per tile.
inline constexpr int64_t kBlockedMinRows = 16;
// Cache blocking of the blocked path: k-block x panel-block of fp32 weights
// (256 x 128 floats = 128 KB, in L2) and row-block (72 rows x 1 KB of x).
inline constexpr int64_t kBlockK = 256;
inline constexpr int64_t kBlockPanels = 8;
inline constexpr int64_t kBlockRows = 72;
static_assert(kBlockK * kBlockPanels * kPanelWidth <= kLinearScratchFloats);
// Bytes of weight panels a direct-path group keeps in L2 while the row
// tiles pass over it.
inline constexpr int64_t kDirectGroupBytes = 256 * 1024;
// How far ahead (in k-rows of a panel) the direct path's tiles prefetch
// 16-bit weights: 2 KiB of each panel (32 to 128 rows measured the same).
inline constexpr int64_t kPrefetchRows = 64;

template <class S, ElemType W>
struct Panel;
template <class S>
struct Panel<S, ElemType::kF32> {
  using T = float;
  static void Load(const T* p, typename S::V* out) { S::LoadPanelF32(p, out); }
};
template <class S>
struct Panel<S, ElemType::kF16> {
  using T = uint16_t;
  static void Load(const T* p, typename S::V* out) { S::LoadPanelF16(p, out); }
};
template <class S>
struct Panel<S, ElemType::kBF16> {
  using T = uint16_t;
  static void Load(const T* p, typename S::V* out) { S::LoadPanelBf16(p, out); }
};

// Valid lanes of vector j of a tile with `cols` valid columns.
template <class S>
inline int LanesOf(int j, int cols) {
  int n = cols - j * S::kLanes;
  return n < 0 ? 0 : (n > S::kLanes ? S::kLanes : n);
}

// One register tile: R rows x P panels (16 P columns) over k in [0, kc).
// x points at row 0, element k 0; w at panel 0, k-row 0 (panels `stride`
// elements apart); y at row 0, column 0. `cols` (<= 16 P) columns are
// valid. The accumulators start at zero (first) or at y's partial sums, and
// y receives them (plus bias when last).
template <class S, ElemType W, int R, int P>
void Tile(const float* x, int64_t ldx, const typename Panel<S, W>::T* w, int64_t stride, int64_t kc, float* y,
          int64_t ldy, int cols, const float* bias, bool first, bool last) {
  using V = typename S::V;
  constexpr int NV = S::kPanelVectors;
  constexpr int J = P * NV;  // accumulator vectors per row
  V acc[R][J];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      int lanes = LanesOf<S>(j, cols);
      const float* src = y + r * ldy + j * S::kLanes;
      acc[r][j] = first || lanes == 0  ? S::Zero()
                  : lanes == S::kLanes ? S::Load(src)
                                       : S::LoadPart(src, lanes);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    V wv[P][NV];
    if constexpr (W != ElemType::kF32) {
      // 16-bit panels are read here only by the direct path, which streams
      // them from memory: fetch each panel ahead, a line per two k-rows
      // (TPOT of a BF16 0.5B decode step 11% lower), into L2 (locality 2,
      // prefetcht1), which on an AMD Zen 4 streams 5-10% faster than into L1.
      if ((k & 1) == 0) {
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p)
          __builtin_prefetch(w + p * stride + (k + kPrefetchRows) * kPanelWidth, 0, 2);
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) Panel<S, W>::Load(w + p * stride + k * kPanelWidth, wv[p]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V xv = S::Set1(x[r * ldx + k]);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][p * NV + v] = S::Fma(xv, wv[p][v], acc[r][p * NV + v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) {
    int lanes = LanesOf<S>(j, cols);
    if (lanes == 0) continue;
    V b = S::Zero();
    bool add_bias = last && bias != nullptr;
    if (add_bias)
      b = lanes == S::kLanes ? S::Load(bias + j * S::kLanes) : S::LoadPart(bias + j * S::kLanes, lanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      V out = add_bias ? S::Add(acc[r][j], b) : acc[r][j];
      float* dst = y + r * ldy + j * S::kLanes;
      if (lanes == S::kLanes) {
        S::Store(dst, out);
      } else {
        S::StorePart(dst, out, lanes);
      }
    }
  }
}

static inline int64_t Min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
static inline int64_t Max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// Tile<S, W, R, NP> for a run-time panel count np in [1, P]: the panels
// left at the end of a range are one tile too, whose np FMA chains run side
// by side (one panel at a time, a single chain would wait on the FMA
// latency at every k).
template <class S, ElemType W, int R, int P>
void DirectTile(int np, const float* x, int64_t ldx, const typename Panel<S, W>::T* w, int64_t stride,
                int64_t kc, float* y, int64_t ldy, int cols, const float* bias) {
  if constexpr (P > 1) {
    if (np < P) return DirectTile<S, W, R, P - 1>(np, x, ldx, w, stride, kc, y, ldy, cols, bias);
  }
  Tile<S, W, R, P>(x, ldx, w, stride, kc, y, ldy, cols, bias, true, true);
}

// The direct path's tiles for R rows over panels [p0, p1): as many panels
// per tile as S's registers allow for R rows, and the rest as one tile.
template <class S, ElemType W, int R>
void DirectTiles(const LinearArgs& a, int64_t m, int64_t p0, int64_t p1) {
  using T = typename Panel<S, W>::T;
  constexpr int P = S::kDirectPanels[R];
  const T* panels = static_cast<const T*>(a.w_panels);
  const int64_t stride = a.k_total * kPanelWidth;
  for (int64_t p = p0; p < p1;) {
    const int np = static_cast<int>(Min64(P, p1 - p));
    const int cols = static_cast<int>(Min64(np * kPanelWidth, a.n_total - p * kPanelWidth));
    const float* x = a.x + m * a.ldx;
    float* y = a.y + m * a.ldy + p * kPanelWidth;
    const float* bias = a.bias != nullptr ? a.bias + p * kPanelWidth : nullptr;
    DirectTile<S, W, R, P>(np, x, a.ldx, panels + p * stride, stride, a.k_total, y, a.ldy, cols, bias);
    p += np;
  }
}

// Few rows: the weights stream from memory once. Panels go in groups small
// enough to stay in L2 while every row tile passes over them; each tile
// covers as many panels as the registers allow, so that enough independent
// FMA chains hide the FMA latency even for one row.
template <class S, ElemType W>
void DirectPath(const LinearArgs& a) {
  using T = typename Panel<S, W>::T;
  const int64_t panel_bytes = a.k_total * kPanelWidth * static_cast<int64_t>(sizeof(T));
  const int64_t group = Max64(S::kDirectPanels[1], kDirectGroupBytes / Max64(panel_bytes, 1));
  for (int64_t g0 = a.panel_begin; g0 < a.panel_end; g0 += group) {
    const int64_t g1 = Min64(g0 + group, a.panel_end);
    for (int64_t m = a.m_begin; m < a.m_end; m += 6) {
      switch (Min64(6, a.m_end - m)) {
        case 1: DirectTiles<S, W, 1>(a, m, g0, g1); break;
        case 2: DirectTiles<S, W, 2>(a, m, g0, g1); break;
        case 3: DirectTiles<S, W, 3>(a, m, g0, g1); break;
        case 4: DirectTiles<S, W, 4>(a, m, g0, g1); break;
        case 5: DirectTiles<S, W, 5>(a, m, g0, g1); break;
        default: DirectTiles<S, W, 6>(a, m, g0, g1); break;
      }
    }
  }
}

// One blocked-path tile of R rows and np panels (S::kBlockedPanels or 1).
template <class S, int R>
void BlockedTile(int np, const float* x, int64_t ldx, const float* w, int64_t stride, int64_t kc, float* y,
                 int64_t ldy, int cols, const float* bias, bool first, bool last) {
  if (np == S::kBlockedPanels) {
    Tile<S, ElemType::kF32, R, S::kBlockedPanels>(x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
  } else {
    Tile<S, ElemType::kF32, R, 1>(x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
  }
}

// The same for a run-time row count r in [1, 6].
template <class S>
void BlockedTileRows(int r, int np, const float* x, int64_t ldx, const float* w, int64_t stride, int64_t kc,
                     float* y, int64_t ldy, int cols, const float* bias, bool first, bool last) {
  static_assert(S::kBlockedRows == 6);
  switch (r) {
    case 1: return BlockedTile<S, 1>(np, x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
    case 2: return BlockedTile<S, 2>(np, x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
    case 3: return BlockedTile<S, 3>(np, x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
    case 4: return BlockedTile<S, 4>(np, x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
    case 5: return BlockedTile<S, 5>(np, x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
    default: return BlockedTile<S, 6>(np, x, ldx, w, stride, kc, y, ldy, cols, bias, first, last);
  }
}

// Many rows: GotoBLAS-style blocking. A block of weights (kBlockK x
// kBlockPanels panels) is converted to fp32 once into scratch and reused by
// all row tiles; one panel of it (16 KB) stays in L1 across a row block.
template <class S, ElemType W>
void BlockedPath(const LinearArgs& a) {
  using T = typename Panel<S, W>::T;
  using V = typename S::V;
  constexpr int NV = S::kPanelVectors;
  const T* panels = static_cast<const T*>(a.w_panels);
  const int64_t stride = a.k_total * kPanelWidth;
  for (int64_t pb = a.panel_begin; pb < a.panel_end; pb += kBlockPanels) {
    const int64_t pe = Min64(pb + kBlockPanels, a.panel_end);
    for (int64_t k0 = 0; k0 < a.k_total; k0 += kBlockK) {
      const int64_t kc = Min64(kBlockK, a.k_total - k0);
      const bool first = k0 == 0;
      const bool last = k0 + kc == a.k_total;
      const float* block;
      int64_t block_stride;
      if constexpr (W == ElemType::kF32) {
        block = panels + pb * stride + k0 * kPanelWidth;
        block_stride = stride;
      } else {
        for (int64_t p = pb; p < pe; ++p) {
          const T* src = panels + p * stride + k0 * kPanelWidth;
          float* dst = a.scratch + (p - pb) * kc * kPanelWidth;
          for (int64_t k = 0; k < kc; ++k) {
            V row[NV];
            Panel<S, W>::Load(src + k * kPanelWidth, row);
            for (int v = 0; v < NV; ++v) S::Store(dst + k * kPanelWidth + v * S::kLanes, row[v]);
          }
        }
        block = a.scratch;
        block_stride = kc * kPanelWidth;
      }
      for (int64_t mb = a.m_begin; mb < a.m_end; mb += kBlockRows) {
        const int64_t me = Min64(mb + kBlockRows, a.m_end);
        for (int64_t p = pb; p < pe; p += S::kBlockedPanels) {
          const int np = static_cast<int>(Min64(S::kBlockedPanels, pe - p));
          const int cols = static_cast<int>(Min64(np * kPanelWidth, a.n_total - p * kPanelWidth));
          const float* bias = a.bias != nullptr ? a.bias + p * kPanelWidth : nullptr;
          for (int64_t m = mb; m < me; m += S::kBlockedRows) {
            const int r = static_cast<int>(Min64(S::kBlockedRows, me - m));
            BlockedTileRows<S>(r, np, a.x + m * a.ldx + k0, a.ldx, block + (p - pb) * block_stride,
                               block_stride, kc, a.y + m * a.ldy + p * kPanelWidth, a.ldy, cols, bias, first,
                               last);
          }
        }
      }
    }
  }
}

template <class S, ElemType W>
void LinearTyped(const LinearArgs& a) {
  if (a.m_end - a.m_begin >= kBlockedMinRows) {
    BlockedPath<S, W>(a);
  } else {
    DirectPath<S, W>(a);
  }
}

}  // namespace linear_detail

template <class S>
void VecLinear(const LinearArgs& a) {
  switch (a.w_type) {
    case ElemType::kF32: return linear_detail::LinearTyped<S, ElemType::kF32>(a);
    case ElemType::kF16: return linear_detail::LinearTyped<S, ElemType::kF16>(a);
    case ElemType::kBF16: return linear_detail::LinearTyped<S, ElemType::kBF16>(a);
  }
}

}  // namespace kiln::cpu
