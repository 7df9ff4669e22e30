// The AVX-512 roofline loops (compiled with AVX-512 F/BW/VL/VNNI/BF16):
// fp32 FMA on zmm, the bf16 dot product vdpbf16ps, the int8 dot product
// vpdpbusd, and a streaming read. Each is called only when the CPU has its
// instructions.
#include "bench/roofline_loops.h"

// GCC 12's AVX-512 intrinsic headers build some vectors from deliberately
// undefined ones and then warn about them (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::bench::avx512 {

#if defined(__x86_64__)
namespace {

// Horizontal sums through 256-bit halves.
double Sum(__m512 v) {
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

double Sum(__m512i v) {
  __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

double Fp32Fma(int64_t iterations) {
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(c));
  const __m512 scale = _mm512_set1_ps(0.999f);
  const __m512 offset = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], scale, offset);
  }
  __m512 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return Sum(sum);
}

double Bf16Dot(int64_t iterations) {
  // Each vdpbf16ps adds two bf16 products into each of 16 fp32 lanes.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // 1.0, 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x358637bd);  // ~1e-6, ~1e-5
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));  // distinct chains
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return Sum(sum);
}

double Int8Dot(int64_t iterations) {
  // Each vpdpbusd adds four u8 x s8 products into each of 16 i32 lanes.
  const __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-2);
  __m512i acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);  // distinct chains
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  }
  __m512i sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  return Sum(sum);
}

double StreamRead(const void* data, size_t bytes) {
  const float* p = static_cast<const float*>(data);
  const size_t n = bytes / sizeof(float);
  __m512 acc[4];
#pragma GCC unroll 16
  for (int c = 0; c < 4; ++c) acc[c] = _mm512_setzero_ps();
  for (size_t i = 0; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) acc[c] = _mm512_add_ps(acc[c], _mm512_load_ps(p + i + 16 * c));
  }
  return Sum(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

#else  // not x86-64: never called

double Fp32Fma(int64_t) { return 0; }
double Bf16Dot(int64_t) { return 0; }
double Int8Dot(int64_t) { return 0; }
double StreamRead(const void*, size_t) { return 0; }

#endif

}  // namespace kiln::bench::avx512
