// The activations' quantization (QuantizeRowsArgs) on 512 bits: the
// reference's values, scales and piece sums, with the scales of 16 blocks
// of 32 worked out together. Block by block, the 256-bit kernel spent most
// of its time on each block's horizontal maximum, its scalar divisions and
// the piece sums' horizontal adds, and ran at 2.4-3 values a nanosecond.
// Internal linkage, as each kernel file is compiled for its own ISA.
#pragma once

#include <immintrin.h>

#include <cfloat>
#include <cstdint>

#include "backend/cpu/qkernels/qkernel_table.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
namespace kiln::cpu {
namespace {
namespace quantize512 {

inline __m512 Load16(const void* x, bool bf16, int64_t at) {
  if (bf16) {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(x) + at));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  return _mm512_loadu_ps(static_cast<const float*>(x) + at);
}

// max(m, |v|) lane by lane, a NaN in v counting as nothing (as the
// reference's std::max(amax, |x|) keeps amax): MAXPS returns its second
// operand where the first is NaN.
inline __m512 MaxAbs(__m512 m, __m512 v) {
  return _mm512_max_ps(_mm512_abs_ps(v), m);
}

// The 16 lanes' maximum of each of m[0..15], block j's in lane j.
inline __m512 RowMaxima(const __m512 m[16]) {
  __m512 c[8], e[4], f[2];
  // Halves, then quarters, of two vectors at a time: c[i] holds m[2i]'s
  // 8-lane partial maxima in its low 256 bits and m[2i+1]'s in its high.
  for (int i = 0; i < 8; ++i) {
    c[i] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0xEE));
  }
  // e[i]'s 128-bit unit u: m[4i + u]'s 4-lane partial maxima.
  for (int i = 0; i < 4; ++i) {
    e[i] = _mm512_max_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xDD));
  }
  // Within each unit u, pairs of lanes: f[i] lanes 0-1 m[8i + u], 2-3 m[8i + 4 + u].
  for (int i = 0; i < 2; ++i) {
    f[i] = _mm512_max_ps(_mm512_shuffle_ps(e[2 * i], e[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(e[2 * i], e[2 * i + 1], 0xEE));
  }
  // Lane 4u + j: m[4j + u]'s maximum; put block j in lane j.
  const __m512 g = _mm512_max_ps(_mm512_shuffle_ps(f[0], f[1], 0x88), _mm512_shuffle_ps(f[0], f[1], 0xDD));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), g);
}

// BlockScale lane by lane: d = amax / 127, 0 below float's normal range or
// when infinite, and its inverse (0 for d = 0). Divisions are exact, so
// these are the scalar steps' bits.
inline void Scales(__m512 amax, __m512* d, __m512* inverse) {
  const __m512 scale = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
  const __mmask16 normal = _mm512_cmp_ps_mask(scale, _mm512_set1_ps(FLT_MIN), _CMP_GE_OQ) &
                           _mm512_cmp_ps_mask(scale, _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ);
  *d = _mm512_maskz_mov_ps(normal, scale);
  *inverse = _mm512_maskz_div_ps(normal, _mm512_set1_ps(1.0f), *d);
}

// 16 values times their inverse scale, rounded half to even (the default
// rounding mode) and kept above -127 (NaN and out-of-range products
// convert to INT_MIN); the packs below saturate at 127.
inline __m512i Round(__m512 v, __m512 inverse) {
  return _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v, inverse)), _mm512_set1_epi32(-127));
}

// Four vectors of int32 as 64 bytes in order.
inline __m512i Pack64(const __m512i i[4]) {
  const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(i[0], i[1]), _mm512_packs_epi32(i[2], i[3]));
  // Each 128-bit unit u holds dwords u of i[0], i[1], i[2], i[3].
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                  bytes);
}

// The eight 16-byte piece sums of 128 int8 values (a, then b) as int16:
// each byte biased to unsigned, vpsadbw's sums of 8, pairs added, the bias
// (16 x 128) taken off. Exact: |sum| <= 16 x 127.
inline __m128i PieceSums8(__m512i a, __m512i b) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i sa = _mm512_sad_epu8(_mm512_xor_si512(a, flip), _mm512_setzero_si512());
  const __m512i sb = _mm512_sad_epu8(_mm512_xor_si512(b, flip), _mm512_setzero_si512());
  const __m512i even = _mm512_permutex2var_epi64(sa, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), sb);
  const __m512i odd = _mm512_permutex2var_epi64(sa, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), sb);
  return _mm512_cvtepi64_epi16(_mm512_sub_epi64(_mm512_add_epi64(even, odd), _mm512_set1_epi64(2048)));
}

inline __mmask64 FirstBytes(int64_t n) {
  return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
}

// Blocks [b, b + count) of 32 (count <= 16) of row m: 16 blocks' scales
// at once, then four blocks at a time (blocks past count as zeros, not
// stored). kFull: count is 16, known here, so that the loops unroll and
// the 16 maxima stay in registers.
template <bool kFull>
void Blocks32(const QuantizeRowsArgs& a, int64_t m, int64_t b, int count) {
  if constexpr (kFull) count = 16;
  const int64_t k = a.out.k;
  const int64_t at = m * a.ldx + 32 * b;
  __m512 mx[16];
  for (int j = 0; j < 16; ++j) {
    mx[j] = j < count ? MaxAbs(MaxAbs(_mm512_setzero_ps(), Load16(a.x, a.bf16, at + 32 * j)),
                               Load16(a.x, a.bf16, at + 32 * j + 16))
                      : _mm512_setzero_ps();
  }
  __m512 d, inverse;
  Scales(RowMaxima(mx), &d, &inverse);
  _mm512_mask_storeu_ps(a.out.d + m * (k / 32) + b, static_cast<__mmask16>((1u << count) - 1), d);
  alignas(64) float inv[16];
  _mm512_store_ps(inv, inverse);
  int8_t* q = a.out.q + m * k + 32 * b;
  int16_t* sums = a.out.sums + m * (k / 16) + 2 * b;
  for (int j = 0; j < count; j += 4) {
    __m512i bytes[2];
    for (int h = 0; h < 2; ++h) {
      __m512i i[4];
      for (int u = 0; u < 4; ++u) {
        const int block = j + 2 * h + u / 2;
        i[u] = block < count
                   ? Round(Load16(a.x, a.bf16, at + 32 * block + 16 * (u % 2)), _mm512_set1_ps(inv[block]))
                   : _mm512_setzero_si512();
      }
      bytes[h] = Pack64(i);
    }
    const int64_t left = 32 * static_cast<int64_t>(count - j);
    _mm512_mask_storeu_epi8(q + 32 * j, FirstBytes(left), bytes[0]);
    if (left > 64) _mm512_mask_storeu_epi8(q + 32 * j + 64, FirstBytes(left - 64), bytes[1]);
    const int pieces = 2 * (count - j < 4 ? count - j : 4);
    _mm_mask_storeu_epi16(sums + 2 * j, static_cast<__mmask8>((1u << pieces) - 1),
                          PieceSums8(bytes[0], bytes[1]));
  }
}

// Block b of 256 of row m.
inline void Block256(const QuantizeRowsArgs& a, int64_t m, int64_t b) {
  const int64_t k = a.out.k;
  const int64_t at = m * a.ldx + 256 * b;
  __m512 mx = _mm512_setzero_ps();
  for (int u = 0; u < 16; ++u) mx = MaxAbs(mx, Load16(a.x, a.bf16, at + 16 * u));
  __m512 d, inverse;
  Scales(_mm512_set1_ps(_mm512_reduce_max_ps(mx)), &d, &inverse);
  a.out.d[m * (k / 256) + b] = _mm512_cvtss_f32(d);
  int8_t* q = a.out.q + m * k + 256 * b;
  __m512i bytes[4];
  for (int h = 0; h < 4; ++h) {
    __m512i i[4];
    for (int u = 0; u < 4; ++u) i[u] = Round(Load16(a.x, a.bf16, at + 64 * h + 16 * u), inverse);
    bytes[h] = Pack64(i);
    _mm512_storeu_si512(q + 64 * h, bytes[h]);
  }
  int16_t* sums = a.out.sums + m * (k / 16) + 16 * b;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(sums), PieceSums8(bytes[0], bytes[1]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + 8), PieceSums8(bytes[2], bytes[3]));
}

}  // namespace quantize512

// QuantizeRowsArgs' blocks on 512 bits (out.block 32 or 256).
inline void QuantizeRowsAvx512(const QuantizeRowsArgs& a) {
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    if (a.out.block == 256) {
      for (int64_t b = a.b_begin; b < a.b_end; ++b) quantize512::Block256(a, m, b);
      continue;
    }
    int64_t b = a.b_begin;
    for (; b + 16 <= a.b_end; b += 16) quantize512::Blocks32<true>(a, m, b, 16);
    if (b < a.b_end) quantize512::Blocks32<false>(a, m, b, static_cast<int>(a.b_end - b));
  }
}

}  // namespace
}  // namespace kiln::cpu
#endif
