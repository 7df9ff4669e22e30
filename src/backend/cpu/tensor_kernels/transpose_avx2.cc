// 8x8 register transposes (AVX2) for 4-byte elements. Only shuffles: the
// bits move unchanged, so any 4-byte dtype goes through.
#include "backend/cpu/tensor_kernels/transpose_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace kiln::cpu::shape_kernels {
namespace {

// Rows r..r+7 of columns c..c+7: eight source loads, eight destination stores.
inline void Block8x8(const float* s, float* d, int64_t drs, int64_t scs) {
  const __m256 a0 = _mm256_loadu_ps(s + 0 * scs), a1 = _mm256_loadu_ps(s + 1 * scs);
  const __m256 a2 = _mm256_loadu_ps(s + 2 * scs), a3 = _mm256_loadu_ps(s + 3 * scs);
  const __m256 a4 = _mm256_loadu_ps(s + 4 * scs), a5 = _mm256_loadu_ps(s + 5 * scs);
  const __m256 a6 = _mm256_loadu_ps(s + 6 * scs), a7 = _mm256_loadu_ps(s + 7 * scs);
  const __m256 b0 = _mm256_unpacklo_ps(a0, a1), b1 = _mm256_unpackhi_ps(a0, a1);
  const __m256 b2 = _mm256_unpacklo_ps(a2, a3), b3 = _mm256_unpackhi_ps(a2, a3);
  const __m256 b4 = _mm256_unpacklo_ps(a4, a5), b5 = _mm256_unpackhi_ps(a4, a5);
  const __m256 b6 = _mm256_unpacklo_ps(a6, a7), b7 = _mm256_unpackhi_ps(a6, a7);
  const __m256 c0 = _mm256_shuffle_ps(b0, b2, 0x44), c1 = _mm256_shuffle_ps(b0, b2, 0xEE);
  const __m256 c2 = _mm256_shuffle_ps(b1, b3, 0x44), c3 = _mm256_shuffle_ps(b1, b3, 0xEE);
  const __m256 c4 = _mm256_shuffle_ps(b4, b6, 0x44), c5 = _mm256_shuffle_ps(b4, b6, 0xEE);
  const __m256 c6 = _mm256_shuffle_ps(b5, b7, 0x44), c7 = _mm256_shuffle_ps(b5, b7, 0xEE);
  _mm256_storeu_ps(d + 0 * drs, _mm256_permute2f128_ps(c0, c4, 0x20));
  _mm256_storeu_ps(d + 1 * drs, _mm256_permute2f128_ps(c1, c5, 0x20));
  _mm256_storeu_ps(d + 2 * drs, _mm256_permute2f128_ps(c2, c6, 0x20));
  _mm256_storeu_ps(d + 3 * drs, _mm256_permute2f128_ps(c3, c7, 0x20));
  _mm256_storeu_ps(d + 4 * drs, _mm256_permute2f128_ps(c0, c4, 0x31));
  _mm256_storeu_ps(d + 5 * drs, _mm256_permute2f128_ps(c1, c5, 0x31));
  _mm256_storeu_ps(d + 6 * drs, _mm256_permute2f128_ps(c2, c6, 0x31));
  _mm256_storeu_ps(d + 7 * drs, _mm256_permute2f128_ps(c3, c7, 0x31));
}

inline void CopyOne(const uint8_t* src, uint8_t* dst, int64_t r, int64_t c, int64_t drs, int64_t scs) {
  std::memcpy(dst + (r * drs + c) * 4, src + (r + c * scs) * 4, 4);
}

}  // namespace

void CopyTransposed4Avx2(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t drs,
                         int64_t scs) {
  const auto* s = reinterpret_cast<const float*>(src);
  auto* d = reinterpret_cast<float*>(dst);
  const int64_t rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
  // Blocks of 64 source rows by 8 columns, as the scalar version, for the cache.
  constexpr int64_t kRows = 64;
  for (int64_t r0 = 0; r0 < rows8; r0 += kRows) {
    const int64_t r1 = std::min(rows8, r0 + kRows);
    for (int64_t c = 0; c < cols8; c += 8) {
      for (int64_t r = r0; r < r1; r += 8) Block8x8(s + r + c * scs, d + r * drs + c, drs, scs);
    }
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = cols8; c < cols; ++c) CopyOne(src, dst, r, c, drs, scs);
    }
  }
  for (int64_t r = rows8; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) CopyOne(src, dst, r, c, drs, scs);
  }
}

}  // namespace kiln::cpu::shape_kernels
