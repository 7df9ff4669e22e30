// The AVX2 roofline loops (compiled with -mavx2 -mfma -mf16c): fp32 FMA,
// bf16 and f16 widened to fp32 then FMA (what kiln's kernels do on CPUs
// without a bf16 dot product), int8 through vpmaddubsw + vpmaddwd, the
// AVX-VNNI int8 dot product, and a streaming read.
#include "bench/roofline_loops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::bench::avx2 {

#if defined(__x86_64__)
namespace {

// Tells the compiler the register may have changed, so that work derived
// from it is redone every iteration instead of hoisted out of the loop. It
// emits no instruction.
template <typename V>
inline void Opaque(V& v) {
  __asm__ volatile("" : "+x"(v));
}

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

double Fp32Fma(int64_t iterations) {
  __m256 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(c));
  const __m256 scale = _mm256_set1_ps(0.999f);
  const __m256 offset = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], scale, offset);
  }
  __m256 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return HorizontalSum(sum);
}

double Bf16WidenFma(int64_t iterations) {
  // Four registers of 16 packed bf16 weights each, split into two fp32
  // vectors by a shift and a mask (kiln's AVX2 bf16 panel layout), each
  // multiplied by a broadcast activation into its own accumulator.
  __m256i w[kWidenChains / 2];
#pragma GCC unroll 16
  for (int j = 0; j < kWidenChains / 2; ++j) w[j] = _mm256_set1_epi32(0x3f803f80 + j);  // bf16 1.0, 1.0
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const __m256 x = _mm256_set1_ps(1e-6f);
  __m256 acc[kWidenChains];
#pragma GCC unroll 16
  for (int c = 0; c < kWidenChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < kWidenChains / 2; ++j) {
      Opaque(w[j]);
      __m256 lo = _mm256_castsi256_ps(_mm256_slli_epi32(w[j], 16));
      __m256 hi = _mm256_castsi256_ps(_mm256_and_si256(w[j], high));
      acc[2 * j] = _mm256_fmadd_ps(lo, x, acc[2 * j]);
      acc[2 * j + 1] = _mm256_fmadd_ps(hi, x, acc[2 * j + 1]);
    }
  }
  __m256 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kWidenChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return HorizontalSum(sum);
}

double F16WidenFma(int64_t iterations) {
  // Eight halves per conversion (vcvtph2ps), then an FMA, as kiln's f16
  // panels are loaded.
  __m128i h[kWidenChains / 2];
#pragma GCC unroll 16
  for (int j = 0; j < kWidenChains / 2; ++j) h[j] = _mm_set1_epi16(static_cast<short>(0x3c00 + j));  // ~1.0
  const __m256 x = _mm256_set1_ps(1e-6f);
  __m256 acc[kWidenChains];
#pragma GCC unroll 16
  for (int c = 0; c < kWidenChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 8
    for (int c = 0; c < kWidenChains; ++c) {
      __m128i& src = h[c % (kWidenChains / 2)];
      Opaque(src);
      acc[c] = _mm256_fmadd_ps(_mm256_cvtph_ps(src), x, acc[c]);
    }
  }
  __m256 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kWidenChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return HorizontalSum(sum);
}

double Int8Madd(int64_t iterations) {
  // u8 x s8 products summed in pairs to i16 (vpmaddubsw), pairs of those to
  // i32 (vpmaddwd with ones), then accumulated (vpaddd): 32 multiply-adds.
  // Only the 1-cycle vpaddd is loop-carried, so few chains suffice.
  __m256i a[2] = {_mm256_set1_epi8(3), _mm256_set1_epi8(5)};
  const __m256i b = _mm256_set1_epi8(-2);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[kInt8MaddChains];
#pragma GCC unroll 16
  for (int c = 0; c < kInt8MaddChains; ++c) acc[c] = _mm256_set1_epi32(c);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 8
    for (int c = 0; c < kInt8MaddChains; ++c) {
      __m256i& src = a[c % 2];
      Opaque(src);
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(src, b), ones));
    }
  }
  __m256i sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kInt8MaddChains; ++c) sum = _mm256_add_epi32(sum, acc[c]);
  return HorizontalSum(sum);
}

__attribute__((target("avxvnni"))) double Int8DotAvxVnni(int64_t iterations) {
  const __m256i a = _mm256_set1_epi8(3);
  const __m256i b = _mm256_set1_epi8(-2);
  __m256i acc[kVnniChains];
#pragma GCC unroll 16
  for (int c = 0; c < kVnniChains; ++c) acc[c] = _mm256_set1_epi32(c);  // distinct, or the chains would merge
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 8
    for (int c = 0; c < kVnniChains; ++c) acc[c] = _mm256_dpbusd_avx_epi32(acc[c], a, b);
  }
  __m256i sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kVnniChains; ++c) sum = _mm256_add_epi32(sum, acc[c]);
  return HorizontalSum(sum);
}

double StreamRead(const void* data, size_t bytes) {
  const float* p = static_cast<const float*>(data);
  const size_t n = bytes / sizeof(float);
  __m256 acc[8];
#pragma GCC unroll 16
  for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
  for (size_t i = 0; i + 64 <= n; i += 64) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_add_ps(acc[c], _mm256_load_ps(p + i + 8 * c));
  }
  __m256 sum = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < 8; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return HorizontalSum(sum);
}

#else  // not x86-64: never called (LoopsForThisCpu offers these only with AVX2)

double Fp32Fma(int64_t) { return 0; }
double Bf16WidenFma(int64_t) { return 0; }
double F16WidenFma(int64_t) { return 0; }
double Int8Madd(int64_t) { return 0; }
double Int8DotAvxVnni(int64_t) { return 0; }
double StreamRead(const void*, size_t) { return 0; }

#endif

}  // namespace kiln::bench::avx2
