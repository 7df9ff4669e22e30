// The int8 GEMM with 256-bit vectors: AVX2 (maddubs) and AVX-VNNI (vpdpbusd).
// Each output is the exact int32 dot product, so both equal the reference.
#include "backend/cpu/w8a8/int8_gemm_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/w8a8/int8_weight.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGroupBytes = kInt8PanelRows * kInt8GroupK;
constexpr int kRows = 4;  // rows of x per tile: 4 x 2 accumulators

inline int32_t Load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// y[m, n0 .. n0 + valid) from the 8 int32 sums of a half panel.
inline void Store(__m256i sums, const Int8GemmArgs& a, int64_t m, int64_t n0, int64_t valid) {
  if (valid <= 0) return;
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(valid, 8))),
                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(a.x_scale[m]), _mm256_loadu_ps(a.w_scale + n0));
  const __m256 bias = a.bias != nullptr ? _mm256_maskload_ps(a.bias + n0, mask) : _mm256_setzero_ps();
  _mm256_maskstore_ps(a.y + m * a.ldy + n0, mask, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, bias));
}

// x rows m0 .. m0 + R against one panel. Signed x times signed w through
// maddubs (u8 x s8): |x| against w carrying x's sign, so no pair of
// products exceeds 2 * 127 * 127 and the int16 sums never saturate.
template <int R>
void TileAvx2(const Int8GemmArgs& a, const int8_t* panel, int64_t groups, int64_t m0, int64_t n0, int64_t valid) {
  __m256i acc[R][2];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t g = 0; g < groups; ++g) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * kGroupBytes));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * kGroupBytes + 32));
    for (int i = 0; i < R; ++i) {
      const __m256i x = _mm256_set1_epi32(Load4(a.xq + (m0 + i) * a.ldxq + g * kInt8GroupK));
      const __m256i x_abs = _mm256_sign_epi8(x, x);
      const __m256i p0 = _mm256_maddubs_epi16(x_abs, _mm256_sign_epi8(w0, x));
      const __m256i p1 = _mm256_maddubs_epi16(x_abs, _mm256_sign_epi8(w1, x));
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(p0, ones));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(p1, ones));
    }
  }
  for (int i = 0; i < R; ++i) {
    Store(acc[i][0], a, m0 + i, n0, valid);
    Store(acc[i][1], a, m0 + i, n0 + 8, valid - 8);
  }
}

// As TileAvx2 with vpdpbusd on x + 128 (unsigned); the sums are corrected
// by 128 * sum_k w.
template <int R>
__attribute__((target("avx2,fma,avxvnni"))) void TileAvxVnni(const Int8GemmArgs& a, const int8_t* panel,
                                                               int64_t groups, int64_t m0, int64_t n0, int64_t valid) {
  __m256i acc[R][2];
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; ++g) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * kGroupBytes));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * kGroupBytes + 32));
    for (int i = 0; i < R; ++i) {
      const __m256i x = _mm256_set1_epi32(Load4(a.xq + (m0 + i) * a.ldxq + g * kInt8GroupK));
      acc[i][0] = _mm256_dpbusd_avx_epi32(acc[i][0], x, w0);
      acc[i][1] = _mm256_dpbusd_avx_epi32(acc[i][1], x, w1);
    }
  }
  const __m256i c0 = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.w_sum + n0)), 7);
  const __m256i c1 = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.w_sum + n0 + 8)), 7);
  for (int i = 0; i < R; ++i) {
    Store(_mm256_sub_epi32(acc[i][0], c0), a, m0 + i, n0, valid);
    Store(_mm256_sub_epi32(acc[i][1], c1), a, m0 + i, n0 + 8, valid - 8);
  }
}

template <void (*Tile1)(const Int8GemmArgs&, const int8_t*, int64_t, int64_t, int64_t, int64_t),
          void (*Tile2)(const Int8GemmArgs&, const int8_t*, int64_t, int64_t, int64_t, int64_t),
          void (*Tile3)(const Int8GemmArgs&, const int8_t*, int64_t, int64_t, int64_t, int64_t),
          void (*Tile4)(const Int8GemmArgs&, const int8_t*, int64_t, int64_t, int64_t, int64_t)>
void Gemm(const Int8GemmArgs& a) {
  const int64_t groups = a.kp / kInt8GroupK;
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    const int8_t* panel = a.w_panels + p * groups * kGroupBytes;
    const int64_t n0 = p * kInt8PanelRows;
    const int64_t valid = std::min<int64_t>(kInt8PanelRows, a.n_total - n0);
    int64_t m = a.m_begin;
    for (; m + kRows <= a.m_end; m += kRows) Tile4(a, panel, groups, m, n0, valid);
    switch (a.m_end - m) {
      case 3: Tile3(a, panel, groups, m, n0, valid); break;
      case 2: Tile2(a, panel, groups, m, n0, valid); break;
      case 1: Tile1(a, panel, groups, m, n0, valid); break;
      default: break;
    }
  }
}

}  // namespace

void Int8GemmAvx2(const Int8GemmArgs& a) {
  Gemm<&TileAvx2<1>, &TileAvx2<2>, &TileAvx2<3>, &TileAvx2<4>>(a);
}

void Int8GemmAvxVnni(const Int8GemmArgs& a) {
  Gemm<&TileAvxVnni<1>, &TileAvxVnni<2>, &TileAvxVnni<3>, &TileAvxVnni<4>>(a);
}

}  // namespace kiln::cpu

#else  // not x86-64: never dispatched to, defined for the link

namespace kiln::cpu {
void Int8GemmAvx2(const Int8GemmArgs& a) { Int8GemmReference(a); }
void Int8GemmAvxVnni(const Int8GemmArgs& a) { Int8GemmReference(a); }
}  // namespace kiln::cpu

#endif
