// The AVX-512 kernel of FastReorder between row-major NCHW and nchw16c: 16
// channel planes and 16 pixels at a time, a 16 x 16 transpose in
// registers, where the plane loops store or load one lane at a time.
// GCC 12 flags the vector intrinsics' own undefined-value idiom (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "backend/cpu/tensor_kernels/layout_reorder.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlock = 16;

// r[i] lane j <- r[j] lane i.
inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // In each 128-bit lane k: r[4i + j] holds column 4k + j of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Then the 128-bit lanes: column 4k + j gathers lane k of r[j], r[4 + j], r[8 + j], r[12 + j].
  for (int j = 0; j < 4; ++j) {
    const __m512 t0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    const __m512 t1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    const __m512 t2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 t3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    t[j] = _mm512_shuffle_f32x4(t0, t2, 0x88);
    t[8 + j] = _mm512_shuffle_f32x4(t0, t2, 0xdd);
    t[4 + j] = _mm512_shuffle_f32x4(t1, t3, 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(t1, t3, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

}  // namespace

void ReorderBlockPixelsAvx512(const float* src, float* dst, bool to_blocked, int64_t channels, int64_t pixels,
                              int64_t n, int64_t cb, int64_t p_begin, int64_t p_end) {
  const int64_t blocks = (channels + kBlock - 1) / kBlock;
  const int64_t live =
      channels - cb * kBlock < kBlock ? channels - cb * kBlock : kBlock;  // channels in this block
  const float* planes_in = src + (n * channels + cb * kBlock) * pixels;   // to_blocked
  float* planes_out = dst + (n * channels + cb * kBlock) * pixels;        // from blocked
  const float* blocked_in = src + (n * blocks + cb) * pixels * kBlock;
  float* blocked_out = dst + (n * blocks + cb) * pixels * kBlock;
  int64_t p = p_begin;
  __m512 r[16];
  for (; p + kBlock <= p_end; p += kBlock) {
    if (to_blocked) {
      for (int64_t j = 0; j < kBlock; ++j)
        r[j] = j < live ? _mm512_loadu_ps(planes_in + j * pixels + p) : _mm512_setzero_ps();
      Transpose16x16(r);
      for (int64_t q = 0; q < kBlock; ++q) _mm512_storeu_ps(blocked_out + (p + q) * kBlock, r[q]);
    } else {
      for (int64_t q = 0; q < kBlock; ++q) r[q] = _mm512_loadu_ps(blocked_in + (p + q) * kBlock);
      Transpose16x16(r);
      for (int64_t j = 0; j < live; ++j) _mm512_storeu_ps(planes_out + j * pixels + p, r[j]);
    }
  }
  // The last pixels one at a time.
  for (; p < p_end; ++p) {
    for (int64_t j = 0; j < kBlock; ++j) {
      if (to_blocked) {
        blocked_out[p * kBlock + j] = j < live ? planes_in[j * pixels + p] : 0.0f;
      } else if (j < live) {
        planes_out[j * pixels + p] = blocked_in[p * kBlock + j];
      }
    }
  }
}

}  // namespace kiln::cpu
