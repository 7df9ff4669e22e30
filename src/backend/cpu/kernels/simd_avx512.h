// 16-lane fp32 vectors for AVX-512 (F, BW, VL): the same operations as
// SimdAvx2, twice as wide. Include only from *_avx512.cc.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kiln::cpu {

struct SimdAvx512 {
  static constexpr int kLanes = 16;
  using V = __m512;
  using VI = __m512i;
  using Mask = __mmask16;

  // 32 registers: tiles twice as wide as AVX2's in panels (one vector per
  // panel instead of two), and 4 panels up to 6 rows (24 accumulators, 4
  // weight vectors, 1 broadcast): verifying 4 draft tokens (5 rows) on 2
  // panels ran 1.25-1.35x slower with its weights streaming from memory.
  static constexpr int kDirectPanels[7] = {0, 8, 4, 4, 4, 4, 4};
  static constexpr int kBlockedRows = 6;
  static constexpr int kBlockedPanels = 2;

  static V Zero() { return _mm512_setzero_ps(); }
  static V Set1(float f) { return _mm512_set1_ps(f); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }

  static V LoadPart(const float* p, int n, float fill = 0.0f) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), LaneMask(n), p);
  }
  static V KeepLanes(V v, int n, float fill) {
    return _mm512_mask_blend_ps(LaneMask(n), _mm512_set1_ps(fill), v);
  }
  static void StorePart(float* p, V v, int n) { _mm512_mask_storeu_ps(p, LaneMask(n), v); }

  static V LoadBf16(const uint16_t* p) {
    VI wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static V LoadBf16Part(const uint16_t* p, int n) {
    VI wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(LaneMask(n), p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static void StoreBf16(uint16_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), ToBf16(v)); }
  static void StoreBf16Part(uint16_t* p, V v, int n) { _mm256_mask_storeu_epi16(p, LaneMask(n), ToBf16(v)); }

  static V LoadF16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V LoadF16Part(const uint16_t* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(LaneMask(n), p));
  }
  static void StoreF16(uint16_t* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void StoreF16Part(uint16_t* p, V v, int n) {
    _mm256_mask_storeu_epi16(p, LaneMask(n), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }

  // One k-row of a packed weight panel as one vector in column order. BF16
  // panels interleave columns for AVX2's benefit (see SimdAvx2); here one
  // permutation restores the order.
  static constexpr int kPanelVectors = 1;
  static void LoadPanelF32(const float* p, V out[1]) { out[0] = _mm512_loadu_ps(p); }
  static void LoadPanelF16(const uint16_t* p, V out[1]) { out[0] = LoadF16(p); }
  static void LoadPanelBf16(const uint16_t* p, V out[1]) {
    const VI column_position = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    out[0] = _mm512_permutexvar_ps(column_position, LoadBf16(p));
  }

  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm512_div_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V Fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static V Max(V a, V b) { return _mm512_max_ps(a, b); }
  static V Min(V a, V b) { return _mm512_min_ps(a, b); }
  static V Abs(V a) { return AndBits(a, 0x7fffffff); }
  static V Xor(V a, V b) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  }
  static V SignBit(V a) { return AndBits(a, static_cast<int>(0x80000000u)); }

  static Mask Less(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static Mask IsNan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static V Select(Mask m, V if_true, V if_false) { return _mm512_mask_blend_ps(m, if_false, if_true); }

  static VI RoundToInt(V a) { return _mm512_cvtps_epi32(a); }
  static V IntToFloat(VI a) { return _mm512_cvtepi32_ps(a); }
  static VI HalfDown(VI a) { return _mm512_srai_epi32(a, 1); }
  static VI SubInt(VI a, VI b) { return _mm512_sub_epi32(a, b); }
  static V Pow2(VI n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  }

  // Horizontal sum in a fixed order: halves of 256, 128, then pairs.
  static float ReduceAdd(V v) {
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float ReduceMax(V v) {
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 s8 = _mm256_max_ps(lo, hi);
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  static V SwapPairs(V v) { return _mm512_permute_ps(v, 0xb1); }
  static V LoadDuplicated(const float* p) {
    __m512 half = _mm512_castps256_ps512(_mm256_loadu_ps(p));
    const VI twice = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(twice, half);
  }
  static V EvenSignMask() {
    return _mm512_castsi512_ps(_mm512_set1_epi64(static_cast<long long>(0x0000000080000000ull)));
  }

 private:
  static Mask LaneMask(int n) { return static_cast<Mask>((1u << n) - 1u); }
  static V AndBits(V a, int bits) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(bits)));
  }
  static __m256i ToBf16(V v) {
    VI u = _mm512_castps_si512(v);
    VI lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    VI rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    Mask nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                       _mm512_set1_epi32(0x7f800000));
    VI quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
  }
};

}  // namespace kiln::cpu
