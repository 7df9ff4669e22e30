// The int8 GEMM with AVX-512 VNNI: one vpdpbusd adds four u8 x s8 products
// into each of 16 int32 lanes (one panel of output rows), on activations
// offset by 128 to unsigned; the offset is taken back out exactly.
#include "backend/cpu/w8a8/int8_gemm_kernels.h"

// GCC 12's AVX-512 intrinsic headers build some vectors from deliberately
// undefined ones and then warn about them (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/w8a8/int8_weight.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGroupBytes = kInt8PanelRows * kInt8GroupK;
constexpr int kRows = 8;  // rows of x per tile

inline int32_t Load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int R>
void Tile(const Int8GemmArgs& a, const int8_t* panel, int64_t groups, int64_t m0, int64_t n0, __mmask16 mask) {
  __m512i acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_si512();
  for (int64_t g = 0; g < groups; ++g) {
    const __m512i w = _mm512_load_si512(panel + g * kGroupBytes);
    for (int i = 0; i < R; ++i) {
      const __m512i x = _mm512_set1_epi32(Load4(a.xq + (m0 + i) * a.ldxq + g * kInt8GroupK));
      acc[i] = _mm512_dpbusd_epi32(acc[i], x, w);
    }
  }
  const __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512(a.w_sum + n0), 7);
  const __m512 w_scale = _mm512_loadu_ps(a.w_scale + n0);
  const __m512 bias = a.bias != nullptr ? _mm512_maskz_loadu_ps(mask, a.bias + n0) : _mm512_setzero_ps();
  for (int i = 0; i < R; ++i) {
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(a.x_scale[m0 + i]), w_scale);
    const __m512 sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i], offset));
    _mm512_mask_storeu_ps(a.y + (m0 + i) * a.ldy + n0, mask, _mm512_fmadd_ps(sums, scale, bias));
  }
}

}  // namespace

void Int8GemmAvx512Vnni(const Int8GemmArgs& a) {
  const int64_t groups = a.kp / kInt8GroupK;
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    const int8_t* panel = a.w_panels + p * groups * kGroupBytes;
    const int64_t n0 = p * kInt8PanelRows;
    const int64_t valid = std::min<int64_t>(kInt8PanelRows, a.n_total - n0);
    const auto mask = static_cast<__mmask16>((1u << valid) - 1u);
    int64_t m = a.m_begin;
    for (; m + kRows <= a.m_end; m += kRows) Tile<kRows>(a, panel, groups, m, n0, mask);
    switch (a.m_end - m) {
      case 7: Tile<7>(a, panel, groups, m, n0, mask); break;
      case 6: Tile<6>(a, panel, groups, m, n0, mask); break;
      case 5: Tile<5>(a, panel, groups, m, n0, mask); break;
      case 4: Tile<4>(a, panel, groups, m, n0, mask); break;
      case 3: Tile<3>(a, panel, groups, m, n0, mask); break;
      case 2: Tile<2>(a, panel, groups, m, n0, mask); break;
      case 1: Tile<1>(a, panel, groups, m, n0, mask); break;
      default: break;
    }
  }
}

}  // namespace kiln::cpu

#else  // not x86-64: never dispatched to, defined for the link

namespace kiln::cpu {
void Int8GemmAvx512Vnni(const Int8GemmArgs& a) { Int8GemmReference(a); }
}  // namespace kiln::cpu

#endif
