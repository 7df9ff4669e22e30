// 8-lane fp32 vectors for AVX2 + FMA + F16C: the operations the generic
// vector kernels (*_simd.h) are written in. Include only from *_avx2.cc.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kiln::cpu {

struct SimdAvx2 {
  static constexpr int kLanes = 8;
  using V = __m256;
  using VI = __m256i;
  using Mask = __m256;  // all-ones lanes where true

  // Linear-kernel register blocking (see linear_simd.h): how many 16-column
  // panels a tile of r rows covers when weights stream from memory, and the
  // tile of the cache-blocked path. 16 registers: the 6x16 tile holds 12
  // accumulators, 2 weight vectors and 1 broadcast.
  static constexpr int kDirectPanels[7] = {0, 4, 2, 2, 1, 1, 1};
  static constexpr int kBlockedRows = 6;
  static constexpr int kBlockedPanels = 1;

  static V Zero() { return _mm256_setzero_ps(); }
  static V Set1(float f) { return _mm256_set1_ps(f); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }

  // Lanes [0, n) of p, the others `fill`. REQUIRES: 0 <= n <= kLanes.
  static V LoadPart(const float* p, int n, float fill = 0.0f) {
    VI mask = LaneMask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, mask), _mm256_castsi256_ps(mask));
  }
  // v with lanes [n, kLanes) replaced by `fill`.
  static V KeepLanes(V v, int n, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(LaneMask(n)));
  }
  // Stores lanes [0, n). REQUIRES: 0 <= n <= kLanes.
  static void StorePart(float* p, V v, int n) { _mm256_maskstore_ps(p, LaneMask(n), v); }

  static V LoadBf16(const uint16_t* p) {
    VI wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static V LoadBf16Part(const uint16_t* p, int n) {
    alignas(16) uint16_t tmp[kLanes] = {};
    std::memcpy(tmp, p, sizeof(uint16_t) * static_cast<size_t>(n));
    return LoadBf16(tmp);
  }
  // Rounds to nearest even; NaN stays a quiet NaN (as F32ToBf16).
  static void StoreBf16(uint16_t* p, V v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), ToBf16(v)); }
  static void StoreBf16Part(uint16_t* p, V v, int n) {
    alignas(16) uint16_t tmp[kLanes];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), ToBf16(v));
    std::memcpy(p, tmp, sizeof(uint16_t) * static_cast<size_t>(n));
  }

  static V LoadF16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static V LoadF16Part(const uint16_t* p, int n) {
    alignas(16) uint16_t tmp[kLanes] = {};
    std::memcpy(tmp, p, sizeof(uint16_t) * static_cast<size_t>(n));
    return LoadF16(tmp);
  }
  static void StoreF16(uint16_t* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void StoreF16Part(uint16_t* p, V v, int n) {
    alignas(16) uint16_t tmp[kLanes];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(p, tmp, sizeof(uint16_t) * static_cast<size_t>(n));
  }

  // One k-row of a packed weight panel: 16 columns as kPanelVectors vectors
  // in column order. BF16 panels store column j at position 2j (j < 8) and
  // 2(j-8)+1 (j >= 8), so that one 32-byte load splits into the two
  // vectors with a shift and a mask, no shuffles.
  static constexpr int kPanelVectors = 2;
  static void LoadPanelF32(const float* p, V out[2]) {
    out[0] = _mm256_loadu_ps(p);
    out[1] = _mm256_loadu_ps(p + 8);
  }
  static void LoadPanelF16(const uint16_t* p, V out[2]) {
    out[0] = LoadF16(p);
    out[1] = LoadF16(p + 8);
  }
  static void LoadPanelBf16(const uint16_t* p, V out[2]) {
    VI v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    out[0] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    out[1] = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }

  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm256_div_ps(a, b); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }    // a * b + c, rounded once
  static V Fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a * b, rounded once
  static V Max(V a, V b) { return _mm256_max_ps(a, b); }
  static V Min(V a, V b) { return _mm256_min_ps(a, b); }
  static V Abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static V Xor(V a, V b) { return _mm256_xor_ps(a, b); }
  static V SignBit(V a) { return _mm256_and_ps(_mm256_set1_ps(-0.0f), a); }

  static Mask Less(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static Mask IsNan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static V Select(Mask m, V if_true, V if_false) { return _mm256_blendv_ps(if_false, if_true, m); }

  // Round to nearest even, as integers.
  static VI RoundToInt(V a) { return _mm256_cvtps_epi32(a); }
  static V IntToFloat(VI a) { return _mm256_cvtepi32_ps(a); }
  static VI HalfDown(VI a) { return _mm256_srai_epi32(a, 1); }  // floor(a / 2)
  static VI SubInt(VI a, VI b) { return _mm256_sub_epi32(a, b); }
  // 2^n. REQUIRES: -126 <= n <= 127.
  static V Pow2(VI n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  }

  // Horizontal sum in a fixed order: the two halves, then pairs.
  static float ReduceAdd(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float ReduceMax(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  // Swaps the lanes of each pair (2i, 2i+1).
  static V SwapPairs(V v) { return _mm256_permute_ps(v, 0xb1); }
  // [p0, p0, p1, p1, ...]: each of the first kLanes/2 floats of p twice.
  static V LoadDuplicated(const float* p) {
    __m256 half = _mm256_castps128_ps256(_mm_loadu_ps(p));
    return _mm256_permutevar8x32_ps(half, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
  }
  // [-0, +0, -0, +0, ...]: flips the sign of even lanes when xor-ed.
  static V EvenSignMask() { return _mm256_setr_ps(-0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f); }

 private:
  static VI LaneMask(int n) {
    static constexpr int32_t kMasks[2 * kLanes] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMasks + kLanes - n));
  }
  static __m128i ToBf16(V v) {
    VI u = _mm256_castps_si256(v);
    VI lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    VI rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    VI nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    VI quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    VI r = _mm256_blendv_epi8(rounded, quiet, nan);
    // Narrow 8 x 32 to 8 x 16 bits: pack within 128-bit halves, then gather the halves.
    VI packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    return _mm256_castsi256_si128(packed);
  }
};

}  // namespace kiln::cpu
