// The quantized GEMM with 256-bit integer vectors (and, for few rows of the
// x8 layout with AVX512-VNNI, 512-bit ones), for the AVX2 and AVX-512
// translation units: block-quantized weights (GGUF layouts, read in place)
// times int8 activations (qkernel_table.h's QuantizedRows).
//
// Eight weight rows are done together. Per block, each row's quantized
// values are unpacked once into unsigned (Q8_0: signed) bytes and reused by
// up to kRowTile activation rows. For each (activation row, weight row) the
// products are summed in int32 lanes (AVX2: maddubs + madd; VNNI: vpdpbusd),
// with the format's sub-block scales applied in integers; the eight rows'
// lane vectors are then reduced to one vector holding each row's exact
// block sum. So the per-block integers equal the reference's, and the fp32
// part, acc = fma(d * dx, A, acc) per block in block order (then the B term),
// runs lane by lane in the reference's order: the result equals
// quant_reference.cc bit for bit, whatever the batch, tile or thread split.
//
// Included by *_avx2.cc, *_avx_vnni.cc and *_avx512.cc only. Everything is
// in an anonymous namespace so that each instruction set's copy stays its
// own.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/cpu/qkernels/qkernel_table.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "backend/cpu/qkernels/quantize_rows_avx512.h"
#include "backend/cpu/qkernels/x8_fifth_bits_avx512.h"
#include "quant/ggml_blocks.h"
#include "quant/iquant_grids.h"

namespace kiln::cpu {
namespace {
namespace qgemm {

// Activation rows computed together against one unpacked weight block, and
// rows kept in cache while the weight row groups pass over them.
constexpr int kRowTile = 4;
constexpr int64_t kRowBlock = 32;

// Whether this build has AVX-512's 32 vector registers (else AVX2's 16):
// loops unrolled whole for the 32 spill with 16.
#if defined(__AVX512F__)
constexpr bool kManyVectorRegisters = true;
#else
constexpr bool kManyVectorRegisters = false;
#endif

// Integer dot products of 32 unsigned by 32 signed bytes into 8 int32
// lanes, lane i summing elements 4i .. 4i+3. Cannot overflow for the
// values the formats produce (|u| <= 128, |s| <= 127).
// Dot2Nibbles: Dot(u1, s1) + Dot(u2, s2) for u1, u2 < 16 (Q4_0's values),
// whose int16 pair sums can be added before widening without overflow
// (|each| <= 2 * 15 * 127).
struct DotAvx2 {
  static constexpr bool kVnni = false;
  static __m256i Dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  static __m256i Dot2Nibbles(__m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_maddubs_epi16(u2, s2)),
                             _mm256_set1_epi16(1));
  }
};

// vpdpbusd on 256 bits: EVEX with AVX512-VNNI (and VL), VEX with AVX-VNNI
// (CPUs with VNNI but no AVX-512, and the avx-vnni table on those with both).
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define KILN_QGEMM_VNNI256 1
inline __m256i Dpbusd256(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}

struct DotVnni {
  static constexpr bool kVnni = true;
  static __m256i Dot(__m256i u, __m256i s) { return Dpbusd256(_mm256_setzero_si256(), u, s); }
  static __m256i Dot2Nibbles(__m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    return Dpbusd256(Dpbusd256(_mm256_setzero_si256(), u1, s1), u2, s2);
  }
};
#endif

// As Dot, with the products of pair i (elements 2i, 2i+1) multiplied by the
// int16 scales[i] (the k-quants' sub-block scales): maddubs then madd, which
// no instruction set beats here (VNNI would need a 32-bit multiply after).
inline __m256i ScaledDot(__m256i u, __m256i s, __m256i scales) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales);
}

// [sum(p[0]), ..., sum(p[7])]: each row's lanes added up (exact integers).
inline __m256i ReduceRows8(const __m256i p[8]) {
  const __m256i s01 = _mm256_hadd_epi32(p[0], p[1]);
  const __m256i s23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i s45 = _mm256_hadd_epi32(p[4], p[5]);
  const __m256i s67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23);
  const __m256i s4567 = _mm256_hadd_epi32(s45, s67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                          _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 nibbles-per-byte as 32 bytes: low nibbles first (elements 0-15), then
// high nibbles (16-31): the Q4_0/Q4_1/Q5_x packing.
inline __m256i Nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low), _mm_and_si128(v, low));
}

// Byte i = 0x10 where bit i of the little-endian uint32 at qh is set, else 0.
inline __m256i FifthBits32(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

inline float HalfToFloat(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// ---- Formats with blocks of 32 ------------------------------------------

// What the kernel needs of 8 rows' block b: their values as bytes, d, and
// the second scale (m) where the format has one.
struct Tile32 {
  __m256i w[8];
  alignas(32) float d[8];
  alignas(32) float m[8];
};

// Each format: the block type, how its values come out as bytes, the
// integer correction per activation block (a multiple of the block's sum of
// q), and whether a B term (m * sum q) follows.
struct FormatQ8_0 {
  using Block = BlockQ8_0;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile32& t) {
    t.w[j] = Load256(b->qs);
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
  }
};
struct FormatQ4_0 {
  using Block = BlockQ4_0;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 8;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile32& t) {
    t.w[j] = Nibbles32(b->qs);
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
  }
};
struct FormatQ5_0 {
  using Block = BlockQ5_0;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 16;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile32& t) {
    t.w[j] = _mm256_or_si256(Nibbles32(b->qs), FifthBits32(b->qh));
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
  }
};
struct FormatQ4_1 {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  static void Unpack(const Block* b, int j, Tile32& t) {
    t.w[j] = Nibbles32(b->qs);
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
    t.m[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->m));
  }
};
struct FormatQ5_1 {
  using Block = BlockQ5_1;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  static void Unpack(const Block* b, int j, Tile32& t) {
    t.w[j] = _mm256_or_si256(Nibbles32(b->qs), FifthBits32(b->qh));
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
    t.m[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->m));
  }
};

// The 16 table values in both 128-bit lanes, for pshufb lookups.
inline __m256i IQ4Table() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values));
  return _mm256_set_m128i(t, t);
}

// 16 bytes of IQ4 indices as the 32 signed values they stand for.
inline __m256i IQ4Values32(const uint8_t* qs) { return _mm256_shuffle_epi8(IQ4Table(), Nibbles32(qs)); }

struct FormatIQ4_NL {
  using Block = BlockIQ4_NL;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile32& t) {
    t.w[j] = IQ4Values32(b->qs);
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
  }
};

// Adds activation row block (q, dx, sum of q) times the tile to acc (8 rows).
template <class D, class F>
inline __m256 Accumulate32(const Tile32& t, const int8_t* q, float dx, int32_t q_sum, __m256 acc) {
  const __m256i x = Load256(q);
  __m256i p[8];
  for (int j = 0; j < 8; ++j) {
    if constexpr (F::kSigned) {
      p[j] = D::Dot(_mm256_abs_epi8(t.w[j]), _mm256_sign_epi8(x, t.w[j]));
    } else {
      p[j] = D::Dot(t.w[j], x);
    }
  }
  __m256i a = ReduceRows8(p);
  if constexpr (F::kOffset != 0) a = _mm256_sub_epi32(a, _mm256_set1_epi32(F::kOffset * q_sum));
  const __m256 dxv = _mm256_set1_ps(dx);
  acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(t.d), dxv), _mm256_cvtepi32_ps(a), acc);
  if constexpr (F::kHasMin) {
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(t.m), dxv), _mm256_set1_ps(static_cast<float>(q_sum)), acc);
  }
  return acc;
}

// ---- K-quants: super-blocks of 256 --------------------------------------

struct Tile256 {
  __m256i w[8][8];      // row j, elements 32v .. 32v+31
  __m256i scale[8][8];  // int16 scales of the pairs of vector v: elements 0-15, then 16-31
  __m256i corr[8];      // int16 multipliers of the activation's 16 piece sums, added to A
  __m256i min[8];       // int16 multipliers of the piece sums giving B
  alignas(32) float d[8];
  alignas(32) float dm[8];
};

// The pshufb masks that spread int16 lanes over a vector's two halves: for
// vector v, int16 element `lo` of a 128-bit lane into the low half and `hi`
// into the high half (each half of the source holding the same 8 values).
inline __m256i SpreadMask(int lo, int hi) {
  const auto b0 = static_cast<char>(2 * lo), b1 = static_cast<char>(2 * lo + 1);
  const auto c0 = static_cast<char>(2 * hi), c1 = static_cast<char>(2 * hi + 1);
  return _mm256_setr_epi8(b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, c0, c1, c0, c1, c0, c1, c0,
                          c1, c0, c1, c0, c1, c0, c1, c0, c1);
}

// Scales for 16-value pieces: s16 holds 16 int16 scales, piece i's at lane
// i. Vector v covers pieces 2v and 2v+1.
inline void SetPieceScales(__m256i s16, __m256i out[8]) {
  const __m256i low = _mm256_permute2x128_si256(s16, s16, 0x00);   // pieces 0-7 in both halves
  const __m256i high = _mm256_permute2x128_si256(s16, s16, 0x11);  // pieces 8-15
  for (int v = 0; v < 4; ++v) out[v] = _mm256_shuffle_epi8(low, SpreadMask(2 * v, 2 * v + 1));
  for (int v = 4; v < 8; ++v) out[v] = _mm256_shuffle_epi8(high, SpreadMask(2 * v - 8, 2 * v - 7));
}

// Scales for 32-value sub-blocks: s8 holds 8 int16 scales; vector v uses s8[v].
inline void SetSubBlockScales(__m128i s8, __m256i out[8]) {
  const __m256i both = _mm256_set_m128i(s8, s8);
  for (int v = 0; v < 8; ++v) out[v] = _mm256_shuffle_epi8(both, SpreadMask(v, v));
}

inline uint32_t Word(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// Q4_K/Q5_K's 12 scale bytes as [sc0..sc7, m0..m7], 6 bits each (see
// quant/dequantize.h UnpackScaleMinK4).
inline __m128i UnpackScalesMinsK4(const uint8_t* s) {
  const uint32_t a0 = Word(s), a1 = Word(s + 4), a2 = Word(s + 8);
  const uint32_t sc_low = a0 & 0x3f3f3f3fu, m_low = a1 & 0x3f3f3f3fu;
  const uint32_t sc_high = (a2 & 0x0f0f0f0fu) | ((a0 >> 2) & 0x30303030u);
  const uint32_t m_high = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 2) & 0x30303030u);
  return _mm_set_epi32(static_cast<int>(m_high), static_cast<int>(m_low), static_cast<int>(sc_high),
                       static_cast<int>(sc_low));
}

// Q3_K's 16 6-bit scales (before subtracting 32) as bytes (see
// quant/dequantize.h UnpackScaleQ3_K).
inline __m128i UnpackScalesQ3_K(const uint8_t* s) {
  const uint32_t a0 = Word(s), a1 = Word(s + 4), a2 = Word(s + 8);
  const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const uint32_t s0 = (a0 & m4) | ((a2 & m2) << 4);
  const uint32_t s1 = (a1 & m4) | (((a2 >> 2) & m2) << 4);
  const uint32_t s2 = ((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4);
  const uint32_t s3 = ((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4);
  return _mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1), static_cast<int>(s0));
}

inline __m256i Negate16(__m256i v) { return _mm256_sub_epi16(_mm256_setzero_si256(), v); }

// The K4 sub-block scales, and the mins as -m per 16-value piece.
inline void SetScalesMinsK4(const uint8_t* scales, int j, Tile256& t) {
  const __m128i sm = UnpackScalesMinsK4(scales);
  const __m128i sc = _mm_cvtepu8_epi16(sm);
  const __m128i m = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
  SetSubBlockScales(sc, t.scale[j]);
  t.min[j] = Negate16(_mm256_set_m128i(_mm_unpackhi_epi16(m, m), _mm_unpacklo_epi16(m, m)));
}

struct FormatQ4_K {
  using Block = BlockQ4_K;
  static constexpr bool kSigned = false;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = true;
  static void Unpack(const Block* b, int j, Tile256& t) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = Load256(b->qs + 32 * c);
      t.w[j][2 * c] = _mm256_and_si256(v, low);
      t.w[j][2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
    }
    SetScalesMinsK4(b->scales, j, t);
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
    t.dm[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->dmin));
  }
};

struct FormatQ5_K {
  using Block = BlockQ5_K;
  static constexpr bool kSigned = false;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = true;
  static void Unpack(const Block* b, int j, Tile256& t) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i qh = Load256(b->qh);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = Load256(b->qs + 32 * c);
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4);
      t.w[j][2 * c] = _mm256_or_si256(_mm256_and_si256(v, low), h0);
      t.w[j][2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), h1);
    }
    SetScalesMinsK4(b->scales, j, t);
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
    t.dm[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->dmin));
  }
};

struct FormatQ6_K {
  using Block = BlockQ6_K;
  static constexpr bool kSigned = false;
  static constexpr bool kCorr = true;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i two = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = Load256(b->ql + 64 * h);
      const __m256i ql1 = Load256(b->ql + 64 * h + 32);
      const __m256i qh = Load256(b->qh + 32 * h);
      auto high = [&](int shift) {
        return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), two), 4);
      };
      t.w[j][4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low), high(0));
      t.w[j][4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low), high(2));
      t.w[j][4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low), high(4));
      t.w[j][4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low), high(6));
    }
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    SetPieceScales(s16, t.scale[j]);
    t.corr[j] = Negate16(_mm256_slli_epi16(s16, 5));  // -32 sc
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
  }
};

struct FormatQ2_K {
  using Block = BlockQ2_K;
  static constexpr bool kSigned = false;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = true;
  static void Unpack(const Block* b, int j, Tile256& t) {
    const __m256i two = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = Load256(b->qs + 32 * h);
      for (int g = 0; g < 4; ++g) t.w[j][4 * h + g] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * g), two);
    }
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
    const __m128i nibble = _mm_set1_epi8(0x0F);
    SetPieceScales(_mm256_cvtepu8_epi16(_mm_and_si128(packed, nibble)), t.scale[j]);
    t.min[j] = Negate16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble)));
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
    t.dm[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->dmin));
  }
};

struct FormatQ3_K {
  using Block = BlockQ3_K;
  static constexpr bool kSigned = false;
  static constexpr bool kCorr = true;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    const __m256i two = _mm256_set1_epi8(3);
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i hmask = Load256(b->hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = Load256(b->qs + 32 * h);
      for (int g = 0; g < 4; ++g) {
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(v, 2 * g), two);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(hmask, 4 * h + g), one);
        t.w[j][4 * h + g] = _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
      }
    }
    const __m256i s16 =
        _mm256_sub_epi16(_mm256_cvtepu8_epi16(UnpackScalesQ3_K(b->scales)), _mm256_set1_epi16(32));
    SetPieceScales(s16, t.scale[j]);
    t.corr[j] = Negate16(_mm256_slli_epi16(s16, 2));  // -4 (sc - 32)
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
  }
};

// IQ4_XS: signed table values, one 6-bit scale (minus 32) per 32 values.
struct FormatIQ4_XS {
  using Block = BlockIQ4_XS;
  static constexpr bool kSigned = true;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    alignas(16) int16_t scales[8];
    for (int v = 0; v < 8; ++v) {
      t.w[j][v] = IQ4Values32(b->qs + 16 * v);
      // As UnpackScaleIQ4_XS (quant/dequantize.h).
      const int low = (b->scales_l[v / 2] >> (4 * (v % 2))) & 0x0F;
      const int high = (b->scales_h >> (2 * v)) & 3;
      scales[v] = static_cast<int16_t>((low | (high << 4)) - 32);
    }
    SetSubBlockScales(_mm_load_si128(reinterpret_cast<const __m128i*>(scales)), t.scale[j]);
    t.d[j] = HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d));
  }
};

// ---- Grid i-quants: IQ2_XXS, IQ3_XXS, IQ2_XS, IQ3_S, IQ2_S ----------------
//
// Each vector of 32 values is its grid entries' magnitudes (4 entries of 8
// bytes or 8 of 4, by table lookup), given their signs with SIMD; the
// scales are quant/iquant_decode.h's (odd, per piece of 16) and d is its
// unit, so A is the reference's sum_i sc_i sum w q exactly.

// Byte i = -1 where bit i of `bits` is set (weight i negative), else 0.
inline __m256i SignBytes32(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// 32 magnitudes with the signs of `sign_bits` (bit i: value i negative):
// (m ^ s) - s with s = 0 or -1.
inline __m256i WithSigns(__m256i magnitudes, uint32_t sign_bits) {
  const __m256i s = SignBytes32(sign_bits);
  return _mm256_sub_epi8(_mm256_xor_si256(magnitudes, s), s);
}

// SignsFrom7Bits of every 7-bit pattern, looked up: the tables' targets do
// not all have a popcount instruction, and the library call costs more
// than the rest of a group's decoding.
struct SevenBitSigns {
  uint8_t of[128];
};
constexpr SevenBitSigns MakeSevenBitSigns() {
  SevenBitSigns t{};
  for (uint32_t s = 0; s < 128; ++s) {
    uint32_t parity = 0;
    for (uint32_t b = s; b != 0; b >>= 1) parity ^= b & 1u;
    t.of[s] = static_cast<uint8_t>(s | (parity << 7));
  }
  return t;
}
inline constexpr SevenBitSigns kSevenBitSigns = MakeSevenBitSigns();

inline uint32_t SignsOf7Bits(uint32_t seven) { return kSevenBitSigns.of[seven & 0x7F]; }

// IQ2_XXS / IQ3_XXS: four groups' 7-bit signs (bits 7 l ..) as 32 sign bits.
inline uint32_t SignsOf4Groups(uint32_t packed) {
  uint32_t bits = 0;
  for (int l = 0; l < 4; ++l) bits |= SignsOf7Bits(packed >> (7 * l)) << (8 * l);
  return bits;
}

// Four 8-byte grid entries, in order, as one vector.
inline __m256i Grid8x4(const uint64_t* grid, int i0, int i1, int i2, int i3) {
  return _mm256_setr_epi64x(static_cast<long long>(grid[i0]), static_cast<long long>(grid[i1]),
                            static_cast<long long>(grid[i2]), static_cast<long long>(grid[i3]));
}

// Eight 4-byte grid entries at indices idx[0..7], in order, as one vector.
inline __m256i Grid4x8(const uint32_t* grid, const int idx[8]) {
  return _mm256_setr_epi32(static_cast<int>(grid[idx[0]]), static_cast<int>(grid[idx[1]]),
                           static_cast<int>(grid[idx[2]]), static_cast<int>(grid[idx[3]]),
                           static_cast<int>(grid[idx[4]]), static_cast<int>(grid[idx[5]]),
                           static_cast<int>(grid[idx[6]]), static_cast<int>(grid[idx[7]]));
}

inline void SetGridScales(const int16_t scales[16], float unit, int j, Tile256& t) {
  SetPieceScales(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)), t.scale[j]);
  t.d[j] = unit;
}

// IQ2_XS and IQ2_S: a nibble per piece of 16, the low one first.
inline void NibbleScalesOf16(const uint8_t scales[8], int16_t out[16]) {
  for (int p = 0; p < 16; ++p) out[p] = static_cast<int16_t>(2 * ((scales[p / 2] >> (4 * (p % 2))) & 15) + 1);
}

struct FormatIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static constexpr bool kSigned = true;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    int16_t scales[16];
    for (int v = 0; v < 8; ++v) {
      const uint8_t* g = b->qs + 8 * v;
      const uint32_t packed = Word(g + 4);
      t.w[j][v] = WithSigns(Grid8x4(kIQ2XXSGrid, g[0], g[1], g[2], g[3]), SignsOf4Groups(packed));
      scales[2 * v] = scales[2 * v + 1] = static_cast<int16_t>(2 * (packed >> 28) + 1);
    }
    SetGridScales(scales, HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d)) * 0.125f, j, t);
  }
};

struct FormatIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static constexpr bool kSigned = true;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    int16_t scales[16];
    for (int v = 0; v < 8; ++v) {
      int idx[8];
      for (int h = 0; h < 8; ++h) idx[h] = b->qs[8 * v + h];
      const uint32_t packed = Word(b->scales_signs + 4 * v);
      t.w[j][v] = WithSigns(Grid4x8(kIQ3XXSGrid, idx), SignsOf4Groups(packed));
      scales[2 * v] = scales[2 * v + 1] = static_cast<int16_t>(2 * (packed >> 28) + 1);
    }
    SetGridScales(scales, HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d)) * 0.25f, j, t);
  }
};

struct FormatIQ2_XS {
  using Block = BlockIQ2_XS;
  static constexpr bool kSigned = true;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    for (int v = 0; v < 8; ++v) {
      uint16_t q[4];
      std::memcpy(q, b->qs + 8 * v, sizeof(q));
      uint32_t signs = 0;
      for (int l = 0; l < 4; ++l) signs |= SignsOf7Bits(q[l] >> 9u) << (8 * l);
      t.w[j][v] = WithSigns(Grid8x4(kIQ2XSGrid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511), signs);
    }
    int16_t scales[16];
    NibbleScalesOf16(b->scales, scales);
    SetGridScales(scales, HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d)) * 0.125f, j, t);
  }
};

struct FormatIQ3_S {
  using Block = BlockIQ3_S;
  static constexpr bool kSigned = true;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    for (int v = 0; v < 8; ++v) {
      int idx[8];
      for (int h = 0; h < 8; ++h) idx[h] = b->qs[8 * v + h] | (((b->qh[v] >> h) & 1) << 8);
      t.w[j][v] = WithSigns(Grid4x8(kIQ3SGrid, idx), Word(b->signs + 4 * v));
    }
    int16_t scales[16];
    for (int p = 0; p < 16; ++p) scales[p] = static_cast<int16_t>(2 * ((b->scales[p / 4] >> (4 * (p / 2 % 2))) & 15) + 1);
    SetGridScales(scales, HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d)), j, t);
  }
};

struct FormatIQ2_S {
  using Block = BlockIQ2_S;
  static constexpr bool kSigned = true;
  static constexpr bool kCorr = false;
  static constexpr bool kHasMin = false;
  static void Unpack(const Block* b, int j, Tile256& t) {
    for (int v = 0; v < 8; ++v) {
      int idx[4];
      for (int l = 0; l < 4; ++l) idx[l] = b->qs[4 * v + l] | (((b->qh[v] >> (2 * l)) & 3) << 8);
      t.w[j][v] = WithSigns(Grid8x4(kIQ2SGrid, idx[0], idx[1], idx[2], idx[3]), Word(b->signs + 4 * v));
    }
    int16_t scales[16];
    NibbleScalesOf16(b->scales, scales);
    SetGridScales(scales, HalfToFloat(reinterpret_cast<const uint8_t*>(&b->d)) * 0.125f, j, t);
  }
};

// One vector's products: signed weights (the IQ4 table) take their signs
// onto the activations, so that pairs of |w| * q still fit int16.
template <class F>
inline __m256i ScaledDot256(__m256i w, __m256i x, __m256i scales) {
  if constexpr (F::kSigned) {
    return ScaledDot(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w), scales);
  } else {
    return ScaledDot(w, x, scales);
  }
}

template <class D, class F>
inline __m256 Accumulate256(const Tile256& t, const int8_t* q, float dx, const int16_t* piece_sums, __m256 acc) {
  __m256i x[8];
  for (int v = 0; v < 8; ++v) x[v] = Load256(q + 32 * v);
  const __m256i sums = Load256(piece_sums);
  __m256i p[8];
  for (int j = 0; j < 8; ++j) {
    __m256i s = ScaledDot256<F>(t.w[j][0], x[0], t.scale[j][0]);
    for (int v = 1; v < 8; ++v) s = _mm256_add_epi32(s, ScaledDot256<F>(t.w[j][v], x[v], t.scale[j][v]));
    if constexpr (F::kCorr) s = _mm256_add_epi32(s, _mm256_madd_epi16(t.corr[j], sums));
    p[j] = s;
  }
  const __m256i a = ReduceRows8(p);
  const __m256 dxv = _mm256_set1_ps(dx);
  acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(t.d), dxv), _mm256_cvtepi32_ps(a), acc);
  if constexpr (F::kHasMin) {
    for (int j = 0; j < 8; ++j) p[j] = _mm256_madd_epi16(t.min[j], sums);
    const __m256i b = ReduceRows8(p);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(t.dm), dxv), _mm256_cvtepi32_ps(b), acc);
  }
  return acc;
}

// ---- The driver -----------------------------------------------------------

// Stores the 8 lanes of one output row (n_valid of them), plus bias.
inline void StoreRow(float* y, __m256 v, const float* bias, int n_valid) {
  if (n_valid == 8) {
    if (bias != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(bias));
    _mm256_storeu_ps(y, v);
    return;
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  for (int i = 0; i < n_valid; ++i) y[i] = bias != nullptr ? lanes[i] + bias[i] : lanes[i];
}

// R activation rows from m against the weight row group whose rows start at rows[0..7].
template <class D, class F, int R>
void GroupTile32(const QuantGemmArgs& a, const uint8_t* const rows[8], int64_t m, float* y, const float* bias,
                 int n_valid) {
  using Block = typename F::Block;
  const int64_t blocks = a.k / kQK;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  Tile32 t;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int j = 0; j < 8; ++j) F::Unpack(reinterpret_cast<const Block*>(rows[j]) + b, j, t);
    for (int r = 0; r < R; ++r) {
      const int16_t* s = a.x->row_sums(m + r) + 2 * b;
      acc[r] = Accumulate32<D, F>(t, a.x->row_q(m + r) + kQK * b, a.x->row_d(m + r)[b],
                                  static_cast<int32_t>(s[0]) + s[1], acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(y + r * a.ldy, acc[r], bias, n_valid);
}

template <class D, class F, int R>
void GroupTile256(const QuantGemmArgs& a, const uint8_t* const rows[8], int64_t m, float* y, const float* bias,
                  int n_valid) {
  using Block = typename F::Block;
  const int64_t blocks = a.k / kQK_K;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  Tile256 t;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int j = 0; j < 8; ++j) F::Unpack(reinterpret_cast<const Block*>(rows[j]) + b, j, t);
    for (int r = 0; r < R; ++r) {
      acc[r] = Accumulate256<D, F>(t, a.x->row_q(m + r) + kQK_K * b, a.x->row_d(m + r)[b],
                                   a.x->row_sums(m + r) + 16 * b, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(y + r * a.ldy, acc[r], bias, n_valid);
}

template <class D, class F, bool kSuper>
void GroupTile(int r, const QuantGemmArgs& a, const uint8_t* const rows[8], int64_t m, float* y,
               const float* bias, int n_valid) {
  static_assert(kRowTile == 4);
  if constexpr (kSuper) {
    switch (r) {
      case 1: return GroupTile256<D, F, 1>(a, rows, m, y, bias, n_valid);
      case 2: return GroupTile256<D, F, 2>(a, rows, m, y, bias, n_valid);
      case 3: return GroupTile256<D, F, 3>(a, rows, m, y, bias, n_valid);
      default: return GroupTile256<D, F, 4>(a, rows, m, y, bias, n_valid);
    }
  } else {
    switch (r) {
      case 1: return GroupTile32<D, F, 1>(a, rows, m, y, bias, n_valid);
      case 2: return GroupTile32<D, F, 2>(a, rows, m, y, bias, n_valid);
      case 3: return GroupTile32<D, F, 3>(a, rows, m, y, bias, n_valid);
      default: return GroupTile32<D, F, 4>(a, rows, m, y, bias, n_valid);
    }
  }
}

// Row blocks of kRowBlock activation rows; within each, every row group of
// the range, and within that, tiles of kRowTile rows.
template <class D, class F, bool kSuper>
void Gemm(const QuantGemmArgs& a) {
  for (int64_t mb = a.m_begin; mb < a.m_end; mb += kRowBlock) {
    const int64_t me = mb + kRowBlock < a.m_end ? mb + kRowBlock : a.m_end;
    for (int64_t g = a.g_begin; g < a.g_end; ++g) {
      const int64_t n0 = g * kQuantGroupRows;
      const int n_valid = static_cast<int>(a.n_total - n0 < kQuantGroupRows ? a.n_total - n0 : kQuantGroupRows);
      // Rows past the end repeat the last row; their lanes are not stored.
      const uint8_t* rows[8];
      for (int j = 0; j < 8; ++j) rows[j] = a.w + (n0 + (j < n_valid ? j : n_valid - 1)) * a.row_bytes;
      const float* bias = a.bias != nullptr ? a.bias + n0 : nullptr;
      for (int64_t m = mb; m < me; m += kRowTile) {
        const int r = static_cast<int>(me - m < kRowTile ? me - m : kRowTile);
        GroupTile<D, F, kSuper>(r, a, rows, m, a.y + m * a.ldy + n0, bias, n_valid);
      }
    }
  }
}


// ---- The x8 layout: blocks of 32 repacked at load (quant_matrix.h) --------
//
// One group's blocks come as one stream: the 8 rows' scales of a block in
// one 16-byte load, then its tile, whose vector j holds the j-th 4 values
// (Q4_0: nibble bytes) of every row, one int32 lane per row. So each
// product lands in its row's lane and a block's sums need no reduction
// across lanes. The integers and the fp32 steps are those of the row
// kernels above, so the bits are the reference's.

// The farthest a one-row (decoding) pass prefetches ahead of the tile it
// reads: about half an L2, so that prefetched lines are still there.
constexpr int64_t kX8PrefetchMax = 256 * 1024;

// Asks for a line of streamed weights ahead of its use, into L2 rather than
// L1: fetches into L1 hold its few miss buffers and push out the activation
// row every group re-reads, and on an AMD Zen 4 they left a 2-thread Q4_0
// decode at 22-24 GB/s of its 34 GB/s read peak where fetches into L2 give
// 28-31 (one thread: 13.6 -> 19.6 GB/s).
inline void PrefetchStreamed(const uint8_t* line) {
  _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
}

// Slice `part` of `parts` of the lines of [first, first + bytes), streamed
// (a block's fetches spread over its work instead of one burst).
inline void PrefetchStreamedPart(const uint8_t* first, int64_t bytes, int part, int parts) {
  const int64_t lines = (bytes + 63) / 64;
  for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l)
    PrefetchStreamed(first + 64 * l);
}

// Group g of the x8 copy: half g % 2 of pair g / 2. Block b's 8 scales
// are at scales + 32 b, vector j of its tile at quants + tile_bytes * b +
// 64 j.
struct X8Group {
  const uint8_t* scales;
  const uint8_t* quants;
  // Set for a tile that reads the group from memory (X8SharedRows): where
  // the group's half of the next pair's lines begins and, for the pair's
  // first group, the next pair's scales (FetchGroupBlockAhead).
  const uint8_t* next_lines = nullptr;
  const uint8_t* next_scales = nullptr;
};

inline X8Group GroupOf(const QuantGemmArgs& a, int64_t g) {
  const uint8_t* pair = a.x8 + (g / 2) * a.x8_pair_bytes;
  const int64_t half = g % 2;
  return {pair + 16 * half, pair + X8ScaleBytes(a.w_type, a.k / DTypeBlockSize(a.w_type)) + 32 * half};
}

// The lines `ahead` bytes on from a block's tile of group g (tile_bytes
// each) that g fetches: a pair's first group the first half of the tile's
// lines, its second group the rest.
inline const uint8_t* HalfLinesAhead(const uint8_t* tile, int64_t g, int64_t ahead, int64_t tile_bytes) {
  return tile - 32 * (g % 2) + ahead + tile_bytes / 2 * (g % 2);
}

// While a tile multiplies block b of group g, the same block of the next
// pair: the group's half of its lines and, from the pair's first group, the
// scale line, as X8RowGroups fetches for one row. Nothing where g has no
// fetches set.
inline void FetchGroupBlockAhead(const X8Group& g, int64_t tile_bytes, int64_t scale_stride, int64_t b) {
  if (g.next_lines == nullptr) return;
  for (int64_t line = 0; line < tile_bytes / 2; line += 64)
    PrefetchStreamed(g.next_lines + tile_bytes * b + line);
  if (g.next_scales != nullptr && (scale_stride * b) % 64 == 0)
    PrefetchStreamed(g.next_scales + scale_stride * b);
}

// Group g of a (`group`) with the fetches of FetchGroupBlockAhead set: for
// the first tile of rows, which reads it from memory.
inline X8Group WithNextPairFetched(const QuantGemmArgs& a, const X8Group& group, int64_t g,
                                   int64_t tile_bytes) {
  const int64_t ahead = a.x8_pair_bytes < kX8PrefetchMax ? a.x8_pair_bytes : kX8PrefetchMax;
  X8Group fetching = group;
  fetching.next_lines = HalfLinesAhead(group.quants, g, ahead, tile_bytes);
  fetching.next_scales = g % 2 == 0 ? group.scales + ahead : nullptr;
  return fetching;
}

inline __m256 X8Scales(const X8Group& g, int64_t b) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scales + 32 * b)));
}

// Activation values 4j..4j+3 of the block at q, in every lane.
inline __m256i X8Dword(const int8_t* q, int j) {
  int32_t v;
  std::memcpy(&v, q + 4 * j, 4);
  return _mm256_set1_epi32(v);
}

// acc + Dot(u, s) (see DotAvx2), in one instruction with VNNI.
template <class D>
inline __m256i DotAdd(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, D::Dot(u, s));
}
#if defined(KILN_QGEMM_VNNI256)
template <>
inline __m256i DotAdd<DotVnni>(__m256i acc, __m256i u, __m256i s) {
  return Dpbusd256(acc, u, s);
}
#endif

// One Q8_0 tile's eight block sums against the activation block at q, in
// two chains of four; maddubs takes abs(w) and sign(x, w).
template <class D>
inline __m256i X8SumsQ8_0(const uint8_t* tile, const int8_t* q) {
  __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int j = 0; j < 8; ++j) {
    const __m256i w = Load256(tile + 64 * j);
    p[j % 2] = DotAdd<D>(p[j % 2], _mm256_abs_epi8(w), _mm256_sign_epi8(X8Dword(q, j), w));
  }
  return _mm256_add_epi32(p[0], p[1]);
}

// One activation row m against Q8_0 group g (kFetch: fetching ahead as
// FetchGroupBlockAhead, for the tile that reads g from memory).
template <class D, bool kFetch = false>
void X8TileQ8_0(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                int n_valid) {
  const int64_t blocks = a.k / kQK;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (kFetch) FetchGroupBlockAhead(g, 512, 32, b);
    const __m256i sum = X8SumsQ8_0<D>(g.quants + 512 * b, a.x->row_q(m) + kQK * b);
    const __m256 dx = _mm256_set1_ps(a.x->row_d(m)[b]);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(X8Scales(g, b), dx), _mm256_cvtepi32_ps(sum), acc);
  }
  StoreRow(y, acc, bias, n_valid);
}

// X8TileQ8_0 for two activation rows that share each weight vector's load
// and absolute value.
template <class D, bool kFetch = false>
void X8TileQ8_0Pair(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                    int n_valid) {
  const int64_t blocks = a.k / kQK;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (kFetch) FetchGroupBlockAhead(g, 512, 32, b);
    const uint8_t* tile = g.quants + 512 * b;
    const int8_t* q0 = a.x->row_q(m) + kQK * b;
    const int8_t* q1 = a.x->row_q(m + 1) + kQK * b;
    __m256i p0[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i p1[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      const __m256i w = Load256(tile + 64 * j);
      const __m256i u = _mm256_abs_epi8(w);
      p0[j % 2] = DotAdd<D>(p0[j % 2], u, _mm256_sign_epi8(X8Dword(q0, j), w));
      p1[j % 2] = DotAdd<D>(p1[j % 2], u, _mm256_sign_epi8(X8Dword(q1, j), w));
    }
    const __m256 dw = X8Scales(g, b);
    const __m256 dx0 = _mm256_set1_ps(a.x->row_d(m)[b]);
    const __m256 dx1 = _mm256_set1_ps(a.x->row_d(m + 1)[b]);
    acc0 = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx0), _mm256_cvtepi32_ps(_mm256_add_epi32(p0[0], p0[1])), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx1), _mm256_cvtepi32_ps(_mm256_add_epi32(p1[0], p1[1])), acc1);
  }
  StoreRow(y, acc0, bias, n_valid);
  StoreRow(y + a.ldy, acc1, bias, n_valid);
}

// A Q4_0 tile's four vectors unpacked one at a time, f(j, low, high):
// vector j's low nibbles are values 4j..4j+3 of each row, its high nibbles
// values 16+4j..16+4j+3.
template <class F>
inline void X8ForEachQ4_0Vector(const uint8_t* tile, F&& f) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  for (int j = 0; j < 4; ++j) {
    const __m256i v = Load256(tile + 64 * j);
    f(j, _mm256_and_si256(v, nibble), _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
  }
}

// A Q4_0 tile unpacked whole (low[j], high[j] as above).
inline void X8UnpackQ4_0(const uint8_t* tile, __m256i low[4], __m256i high[4]) {
  X8ForEachQ4_0Vector(tile, [&](int j, __m256i l, __m256i h) {
    low[j] = l;
    high[j] = h;
  });
}

// An unpacked Q4_0 tile's eight block sums against activation row m's
// block b: the nibbles' products less kOffset (Q4_0: 8; Q4_1, whose nibbles
// are laid out alike: 0) times the block's activation sum.
template <class D, int kOffset = 8>
inline __m256i X8SumsQ4_0(const __m256i low[4], const __m256i high[4], const QuantGemmArgs& a, int64_t m,
                          int64_t b) {
  const int8_t* q = a.x->row_q(m) + kQK * b;
  __m256i p[4];
  for (int j = 0; j < 4; ++j) p[j] = D::Dot2Nibbles(low[j], X8Dword(q, j), high[j], X8Dword(q, 4 + j));
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3]));
  if constexpr (kOffset == 0) return sum;
  const int16_t* s = a.x->row_sums(m) + 2 * b;
  return _mm256_sub_epi32(sum, _mm256_set1_epi32(kOffset * (static_cast<int32_t>(s[0]) + s[1])));
}

// An IQ4_NL tile's eight block sums against the activation block at q:
// its layout is Q4_0's (the blocks are byte for byte alike), each nibble
// looked up in the table, and the signed values multiplied as Q8_0's are.
template <class D>
inline __m256i X8SumsIQ4_NL(const uint8_t* tile, const int8_t* q) {
  const __m256i table = IQ4Table();
  __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  X8ForEachQ4_0Vector(tile, [&](int j, __m256i low, __m256i high) {
    const __m256i wl = _mm256_shuffle_epi8(table, low);
    const __m256i wh = _mm256_shuffle_epi8(table, high);
    p[0] = DotAdd<D>(p[0], _mm256_abs_epi8(wl), _mm256_sign_epi8(X8Dword(q, j), wl));
    p[1] = DotAdd<D>(p[1], _mm256_abs_epi8(wh), _mm256_sign_epi8(X8Dword(q, 4 + j), wh));
  });
  return _mm256_add_epi32(p[0], p[1]);
}

// In each 32-bit lane (a row's Q5_0 fifth bits), bits shift..shift+3 as
// bytes 0..3 of the lane: 0x10 where the bit is set, else 0. shift is a
// multiple of 4 (a constant where inlined), so the four bits are one half
// of byte shift / 8: that byte is spread over the lane directly (the
// shuffles of a byte's two halves are one), and a high half's bits,
// 0x10..0x80 once masked, need only a minimum with 0x10. One Zen 3 core
// decoding a 4864 x 896 matrix in cache: Q5_0 174 -> 151 us, Q5_1 178 ->
// 162 us (fastest of 21 runs).
inline __m256i X8FifthBits(__m256i qh, int shift) {
  const auto byte = static_cast<char>(shift / 8);
  const __m256i spread = _mm256_shuffle_epi8(
      qh, _mm256_add_epi8(_mm256_set1_epi8(byte),
                          _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4,
                                           4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12)));
  if (shift % 8 != 0) {
    return _mm256_min_epu8(_mm256_and_si256(spread, _mm256_set1_epi32(static_cast<int>(0x80402010u))),
                           _mm256_set1_epi8(0x10));
  }
  const __m256i bit = _mm256_set1_epi32(0x08040201);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// A Q5_0 tile's eight block sums against activation row m's block b: its
// nibble lines are Q4_0's, the fifth line each row's 32 fifth bits; the
// 5-bit values' products less kOffset (Q5_0: 16; Q5_1: 0) times the
// block's activation sum.
template <class D, int kOffset = 16>
inline __m256i X8SumsQ5_0(const uint8_t* tile, const QuantGemmArgs& a, int64_t m, int64_t b) {
  const int8_t* q = a.x->row_q(m) + kQK * b;
  const __m256i qh = Load256(tile + 256);
  __m256i sum;
  if constexpr (D::kVnni) {
    __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    X8ForEachQ4_0Vector(tile, [&](int j, __m256i low, __m256i high) {
      p[0] = DotAdd<D>(p[0], _mm256_or_si256(low, X8FifthBits(qh, 4 * j)), X8Dword(q, j));
      p[1] = DotAdd<D>(p[1], _mm256_or_si256(high, X8FifthBits(qh, 16 + 4 * j)), X8Dword(q, 4 + j));
    });
    sum = _mm256_add_epi32(p[0], p[1]);
  } else {
    // The low and the high values' products each in int16 (|sum| <= 4 * 2
    // * 31 * 127 = 31496; activations are within [-127, 127]), widened
    // once each, as X8TileNibbles does: two vpmaddwd a block, not 8 (one
    // Zen 3 core, 4864 x 896 in cache: Q5_0 153 -> 148 us, Q5_1 160 -> 151).
    __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    X8ForEachQ4_0Vector(tile, [&](int j, __m256i low, __m256i high) {
      p[0] = _mm256_add_epi16(
          p[0], _mm256_maddubs_epi16(_mm256_or_si256(low, X8FifthBits(qh, 4 * j)), X8Dword(q, j)));
      p[1] = _mm256_add_epi16(
          p[1], _mm256_maddubs_epi16(_mm256_or_si256(high, X8FifthBits(qh, 16 + 4 * j)), X8Dword(q, 4 + j)));
    });
    const __m256i ones = _mm256_set1_epi16(1);
    sum = _mm256_add_epi32(_mm256_madd_epi16(p[0], ones), _mm256_madd_epi16(p[1], ones));
  }
  if constexpr (kOffset == 0) return sum;
  const int16_t* s = a.x->row_sums(m) + 2 * b;
  return _mm256_sub_epi32(sum, _mm256_set1_epi32(kOffset * (static_cast<int32_t>(s[0]) + s[1])));
}

// R activation rows from m against Q4_0 group g, sharing each tile's
// unpacking (kFetch as X8TileQ8_0's).
template <class D, int R, bool kFetch = false>
void X8TileQ4_0(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                int n_valid) {
  const int64_t blocks = a.k / kQK;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (kFetch) FetchGroupBlockAhead(g, 256, 32, b);
    const __m256 dw = X8Scales(g, b);
    __m256i low[4], high[4];
    X8UnpackQ4_0(g.quants + 256 * b, low, high);
    for (int r = 0; r < R; ++r) {
      const __m256i sum = X8SumsQ4_0<D>(low, high, a, m + r, b);
      const __m256 dx = _mm256_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(sum), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(y + r * a.ldy, acc[r], bias, n_valid);
}

// Rows r of a tile from m (several rows: decoding goes through
// X8RowGroups), two at a time sharing the weight loads and (Q8_0) absolute
// values or (Q4_0) the nibble unpacking; four at a time spilled.
template <class D, bool kQ8>
void X8Tile(int r, const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
            int n_valid) {
  int i = 0;
  if constexpr (kQ8) {
    for (; i + 2 <= r; i += 2) X8TileQ8_0Pair<D>(a, g, m + i, y + i * a.ldy, bias, n_valid);
    if (i < r) X8TileQ8_0<D>(a, g, m + i, y + i * a.ldy, bias, n_valid);
  } else {
    for (; i + 2 <= r; i += 2) X8TileQ4_0<D, 2>(a, g, m + i, y + i * a.ldy, bias, n_valid);
    if (i < r) X8TileQ4_0<D, 1>(a, g, m + i, y + i * a.ldy, bias, n_valid);
  }
}

// X8Tile for the tile that reads g from memory: its first two rows (or one)
// fetch the next pair ahead as FetchGroupBlockAhead does (g's fetches set),
// the rest read g from cache. Kept out of X8Tile: built into it, the
// fetching kernels left prefill's slower (512 x 4864 x 896 Q8_0, 4-7%).
template <class D, bool kQ8>
void X8TileFetchingAhead(int r, const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y,
                         const float* bias, int n_valid) {
  const int first = r >= 2 ? 2 : 1;
  if constexpr (kQ8) {
    if (first == 2) {
      X8TileQ8_0Pair<D, true>(a, g, m, y, bias, n_valid);
    } else {
      X8TileQ8_0<D, true>(a, g, m, y, bias, n_valid);
    }
  } else {
    if (first == 2) {
      X8TileQ4_0<D, 2, true>(a, g, m, y, bias, n_valid);
    } else {
      X8TileQ4_0<D, 1, true>(a, g, m, y, bias, n_valid);
    }
  }
  if (r > first) X8Tile<D, kQ8>(r - first, a, g, m + first, y + first * a.ldy, bias, n_valid);
}

// The formats on the x8 layout. Q5_0, IQ4_NL, Q4_1 and Q5_1 run the
// one-row kernel below for one row, and tiles of rows sharing each
// unpacked vector for more (X8SharedRows).
enum class X8Format { kQ8_0, kQ4_0, kIQ4_NL, kQ5_0, kQ4_1, kQ5_1 };

// One activation row (decoding) against G consecutive x8 groups from g0 at
// once: the groups' independent integer work gives the core more to
// overlap than one group's chain of multiplies. Each group's arithmetic is
// X8TileQ8_0's or X8TileQ4_0's (IQ4_NL's, Q5_0's, Q4_1's and Q5_1's: the
// row kernels' integers and, for Q4_1 and Q5_1, Accumulate32's second fma
// with m), so the bits are too.
template <class D, X8Format F, int G>
void X8RowGroups(const QuantGemmArgs& a, int64_t g0, int64_t m) {
  const int64_t blocks = a.k / kQK;
  constexpr bool kFifth = F == X8Format::kQ5_0 || F == X8Format::kQ5_1;
  constexpr bool kHasMin = F == X8Format::kQ4_1 || F == X8Format::kQ5_1;
  constexpr int64_t kTileBytes = F == X8Format::kQ8_0 ? 512 : (kFifth ? 320 : 256);
  constexpr int64_t kScaleStride = kHasMin ? 64 : 32;
  X8Group group[G];
  __m256 acc[G];
  for (int i = 0; i < G; ++i) {
    group[i] = GroupOf(a, g0 + i);
    acc[i] = _mm256_setzero_ps();
  }
  // The same block of the next call's groups (G / 2 pairs on): a fixed
  // distance would land in the groups being read now when they are short.
  // Each group fetches its half of the pair's lines, and the pair's first
  // group its scale line: the hardware prefetcher left those to demand
  // misses (2-thread decode, Zen 4: Q4_0 +11-25%, Q5_0 +24-30%). Not
  // Q8_0's, whose scales are a sixteenth of its bytes: there the extra
  // fetches slowed the LM head's pass by a quarter.
  const int64_t next = (G + 1) / 2 * a.x8_pair_bytes;
  const int64_t ahead = next < kX8PrefetchMax ? next : kX8PrefetchMax;
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* q = a.x->row_q(m) + kQK * b;
    const __m256 dx = _mm256_set1_ps(a.x->row_d(m)[b]);
    [[maybe_unused]] __m256 q_sum;
    if constexpr (kHasMin) {
      const int16_t* s = a.x->row_sums(m) + 2 * b;
      q_sum = _mm256_set1_ps(static_cast<float>(static_cast<int32_t>(s[0]) + s[1]));
    }
    for (int i = 0; i < G; ++i) {
      const uint8_t* tile = group[i].quants + kTileBytes * b;
      const uint8_t* lines = HalfLinesAhead(tile, g0 + i, ahead, kTileBytes);
      for (int64_t line = 0; line < kTileBytes / 2; line += 64) {
        PrefetchStreamed(lines + line);
      }
      if (F != X8Format::kQ8_0 && (kScaleStride * b) % 64 == 0 && (g0 + i) % 2 == 0) {
        PrefetchStreamed(group[i].scales + kScaleStride * b + ahead);
      }
      __m256i sum;
      if constexpr (F == X8Format::kQ8_0) {
        sum = X8SumsQ8_0<D>(tile, q);
      } else if constexpr (F == X8Format::kQ4_0) {
        __m256i low[4], high[4];
        X8UnpackQ4_0(tile, low, high);
        sum = X8SumsQ4_0<D>(low, high, a, m, b);
      } else if constexpr (F == X8Format::kIQ4_NL) {
        sum = X8SumsIQ4_NL<D>(tile, q);
      } else if constexpr (F == X8Format::kQ5_0) {
        sum = X8SumsQ5_0<D>(tile, a, m, b);
      } else if constexpr (F == X8Format::kQ4_1) {
        __m256i low[4], high[4];
        X8UnpackQ4_0(tile, low, high);
        sum = X8SumsQ4_0<D, 0>(low, high, a, m, b);
      } else {
        sum = X8SumsQ5_0<D, 0>(tile, a, m, b);
      }
      const uint8_t* scales = group[i].scales + kScaleStride * b;
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
      acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum), acc[i]);
      if constexpr (kHasMin) {
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32)));
        acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(dm, dx), q_sum, acc[i]);
      }
    }
  }
  for (int i = 0; i < G; ++i) {
    const int64_t n0 = (g0 + i) * kQuantGroupRows;
    const int n_valid = static_cast<int>(a.n_total - n0 < kQuantGroupRows ? a.n_total - n0 : kQuantGroupRows);
    StoreRow(a.y + m * a.ldy + n0, acc[i], a.bias != nullptr ? a.bias + n0 : nullptr, n_valid);
  }
}

// ---- K-quants on the x8 layout: one activation row ------------------------
//
// Q2_K to Q6_K. A group's super-block comes as one tile (quant_matrix.h): its half of
// line l is the l-th 4 bytes of each of its 8 rows' block (Q6_K's values
// rearranged), one int32 lane per row, so a broadcast activation dword multiplies every row's values at
// once and each row's products stay in its lane. Products are added in
// int16 lanes (vpmaddubsw) for as many vectors as cannot overflow, then
// scaled by the row's sub-block scale and widened in one vpmaddwd: the
// row kernel's ScaledDot with the lanes of a row instead of a vector per
// row (with VNNI, a sub-block's products add up in int32 by vpdpbusd and
// one vpmulld scales them). So A (and B) are the row kernel's exact
// integers and the fp32 steps (Accumulate256's) are its, lane by lane: the
// same bits.

// A pshufb mask taking the four bytes of `pattern` (offsets 0-3 within a
// dword, 0x80 for a zero byte) from every dword of the source.
inline __m256i DwordBytes(uint32_t pattern) {
  const __m256i base = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
  return _mm256_or_si256(_mm256_set1_epi32(static_cast<int>(pattern)), base);
}

// Byte k of each dword of v (unsigned) as an int16 pair (v_k, v_k).
inline __m256i LaneByte16(__m256i v, int k) {
  return _mm256_shuffle_epi8(v, DwordBytes(0x80008000u | (static_cast<uint32_t>(k) << 16) | static_cast<uint32_t>(k)));
}

// Bytes k and k+1 of each dword of v (unsigned) as int16s.
inline __m256i LaneBytePair16(__m256i v, int k) {
  return _mm256_shuffle_epi8(
      v, DwordBytes(0x80008000u | (static_cast<uint32_t>(k + 1) << 16) | static_cast<uint32_t>(k)));
}

// Byte k of each dword of v (signed) as an int16 pair (v_k, v_k).
inline __m256i LaneSignedByte16(__m256i v, int k) {
  const auto b = static_cast<uint32_t>(k);
  return _mm256_srai_epi16(_mm256_shuffle_epi8(v, DwordBytes((b << 24) | 0x00800000u | (b << 8) | 0x80u)), 8);
}

// Bytes k and k+1 of each dword of v (signed) as int16s.
inline __m256i LaneSignedBytePair16(__m256i v, int k) {
  const auto b = static_cast<uint32_t>(k);
  return _mm256_srai_epi16(_mm256_shuffle_epi8(v, DwordBytes(((b + 1) << 24) | 0x00800000u | (b << 8) | 0x80u)), 8);
}

// Byte k of each dword of v, unsigned or signed, as an int32.
inline __m256i LaneByte32(__m256i v, int k) {
  return _mm256_shuffle_epi8(v, DwordBytes(0x80808000u | static_cast<uint32_t>(k)));
}
inline __m256i LaneSignedByte32(__m256i v, int k) {
  return _mm256_srai_epi32(_mm256_shuffle_epi8(v, DwordBytes((static_cast<uint32_t>(k) << 24) | 0x808080u)), 24);
}

// The 4-byte piece at `at` (an activation's pair of int16 sums, or 4 int8
// values) in every lane.
inline __m256i Dword(const void* at) {
  int32_t v;
  std::memcpy(&v, at, 4);
  return _mm256_set1_epi32(v);
}

// What a super-block's tiles need of the activation row beyond its values:
// for Q4_K/Q5_K the sums of its 8 sub-blocks of 32 as int16 pairs.
struct SuperRowSums {
  const int16_t* pieces;  // the 16 sums of 16 values
  alignas(16) int16_t sub_blocks[8];
};

inline void SetSubBlockSums(const int16_t* pieces, SuperRowSums* s) {
  s->pieces = pieces;
  const __m256i wide = _mm256_madd_epi16(Load256(pieces), _mm256_set1_epi16(1));  // exact: |sum| <= 4064
  _mm_store_si128(reinterpret_cast<__m128i*>(s->sub_blocks),
                  _mm_packs_epi32(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1)));
}

// A Q4_K/Q5_K tile's 12 packed scale bytes (its first three lines) as in
// UnpackScalesMinsK4, lane by lane: sub-block s's scale is byte s % 4 of
// sc[s / 4], its min byte s % 4 of mins[s / 4].
inline void X8ScalesMinsK45(const uint8_t* tile, __m256i sc[2], __m256i mins[2]) {
  const __m256i a0 = Load256(tile), a1 = Load256(tile + 64), a2 = Load256(tile + 128);
  const __m256i six = _mm256_set1_epi8(0x3F), four = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  sc[0] = _mm256_and_si256(a0, six);
  sc[1] = _mm256_or_si256(_mm256_and_si256(a2, four), _mm256_and_si256(_mm256_srli_epi32(a0, 2), top));
  mins[0] = _mm256_and_si256(a1, six);
  mins[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a2, 4), four),
                            _mm256_and_si256(_mm256_srli_epi32(a1, 2), top));
}

// B = -sum_s m_s (the activation's sum over sub-block s), per row lane.
inline __m256i X8MinsTermK45(const __m256i mins[2], const SuperRowSums& sums) {
  __m256i b = _mm256_setzero_si256();
#pragma GCC unroll 16
  for (int t = 0; t < 4; ++t) {
    b = _mm256_add_epi32(
        b, _mm256_madd_epi16(LaneBytePair16(mins[t / 2], 2 * (t % 2)), Dword(sums.sub_blocks + 2 * t)));
  }
  return _mm256_sub_epi32(_mm256_setzero_si256(), b);
}

// What the one-row super-block sums call at the start of each quarter of
// their work (part 0-3): nothing, or a slice of the next pair's lines
// (X8SuperRowGroups), so that a tile's fetches do not go out in one burst.
struct NoFetch {
  void operator()(int) const {}
};

// Q4_K's or Q5_K's 8 rows (tile: the group's half of the super-block's
// lines) against the activation's 256 values at q: A = sum_s sc_s sum w q
// and B = -sum_s m_s (sum of the activation's sub-block s).
// Every loop here is unrolled whole (GCC left the outer ones rolled): the
// shuffle masks and shift counts then are constants.
template <class D, bool kFifth, class Fetch = NoFetch>
inline void X8SumsK45(const uint8_t* tile, const int8_t* q, const SuperRowSums& sums, __m256i* a_out,
                      __m256i* b_out, const Fetch& fetch = {}) {
  __m256i sc[2], mins[2];
  X8ScalesMinsK45(tile, sc, mins);
  const uint8_t* qh = tile + 64 * 3;
  const uint8_t* qs = tile + 64 * (kFifth ? 11 : 3);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i fifth = _mm256_set1_epi8(0x10);
  // Pair sums of 4-bit values times int8 are at most 2 * 15 * 127 = 3810,
  // so the 8 of a sub-block's lane add up in int16; 5-bit ones (7874) 4 at
  // a time.
  // With VNNI, vpdpbusd adds a sub-block's products in int32 and one
  // vpmulld scales them (at most 32 * 31 * 127 * 63: exact).
  constexpr int kRun = D::kVnni ? 8 : (kFifth ? 4 : 8);
  __m256i a = _mm256_setzero_si256();
  #pragma GCC unroll 16
  for (int c = 0; c < 4; ++c) {
    fetch(c);
    const __m256i scale_low = D::kVnni ? LaneByte32(sc[c / 2], 2 * (c % 2)) : LaneByte16(sc[c / 2], 2 * (c % 2));
    const __m256i scale_high =
        D::kVnni ? LaneByte32(sc[c / 2], 2 * (c % 2) + 1) : LaneByte16(sc[c / 2], 2 * (c % 2) + 1);
    #pragma GCC unroll 16
    for (int j0 = 0; j0 < 8; j0 += kRun) {
      __m256i low_sum = _mm256_setzero_si256(), high_sum = _mm256_setzero_si256();
      #pragma GCC unroll 16
      for (int j = j0; j < j0 + kRun; ++j) {
        const __m256i v = Load256(qs + 64 * (8 * c + j));
        __m256i low = _mm256_and_si256(v, nibble);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
        if constexpr (kFifth) {
          // Bits 2c and 2c+1 of each qh byte to bit 4 (16-bit shifts: the
          // bits crossing bytes are masked off).
          const __m256i h = Load256(qh + 64 * j);
          const __m256i h0 = c < 2 ? _mm256_slli_epi16(h, 4 - 2 * c) : _mm256_srli_epi16(h, 2 * c - 4);
          const __m256i h1 = c < 2 ? _mm256_slli_epi16(h, 3 - 2 * c) : _mm256_srli_epi16(h, 2 * c - 3);
          low = _mm256_or_si256(low, _mm256_and_si256(h0, fifth));
          high = _mm256_or_si256(high, _mm256_and_si256(h1, fifth));
        }
        if constexpr (D::kVnni) {
          low_sum = DotAdd<D>(low_sum, low, Dword(q + 64 * c + 4 * j));
          high_sum = DotAdd<D>(high_sum, high, Dword(q + 64 * c + 32 + 4 * j));
        } else {
          low_sum = _mm256_add_epi16(low_sum, _mm256_maddubs_epi16(low, Dword(q + 64 * c + 4 * j)));
          high_sum = _mm256_add_epi16(high_sum, _mm256_maddubs_epi16(high, Dword(q + 64 * c + 32 + 4 * j)));
        }
      }
      if constexpr (D::kVnni) {
        a = _mm256_add_epi32(a, _mm256_add_epi32(_mm256_mullo_epi32(low_sum, scale_low),
                                                 _mm256_mullo_epi32(high_sum, scale_high)));
      } else {
        a = _mm256_add_epi32(
            a, _mm256_add_epi32(_mm256_madd_epi16(low_sum, scale_low), _mm256_madd_epi16(high_sum, scale_high)));
      }
    }
  }
  *a_out = a;
  *b_out = X8MinsTermK45(mins, sums);
}

// Q6_K's 8 rows against the activation's 256 values at q: A = sum_i sc_i
// (sum w q - 32 s_i) over its 16 pieces of 16.
template <class D, int R, class Fetch = NoFetch>
inline void X8SumsQ6_KRows(const uint8_t* tile, const int8_t* const q[R], const int16_t* const pieces[R],
                           __m256i out[R], const Fetch& fetch = {});

template <class D, class Fetch = NoFetch>
inline __m256i X8SumsQ6_K(const uint8_t* tile, const int8_t* q, const SuperRowSums& sums,
                          const Fetch& fetch = {}) {
  const int8_t* const rows[1] = {q};
  const int16_t* const pieces[1] = {sums.pieces};
  __m256i out[1];
  X8SumsQ6_KRows<D, 1>(tile, rows, pieces, out, fetch);
  return out[0];
}

// Q3_K's 8 rows against the activation's 256 values at q: A = sum_i sc_i
// (sum w q - 4 s_i) over its 16 pieces of 16, w = 2 bits | high bit << 2
// (0..7) and sc_i its 6-bit scale less 32, as FormatQ3_K. Tile lines 0-23
// hold the values rearranged at repack, eight in three bytes (quant_matrix.h:
// six come out with one or two operations, two with five), 24-26 the packed
// scales.
template <class D, class Fetch = NoFetch>
inline __m256i X8SumsQ3_K(const uint8_t* tile, const int8_t* q, const SuperRowSums& sums,
                          const Fetch& fetch = {}) {
  const __m256i a0 = Load256(tile + 64 * 24), a1 = Load256(tile + 64 * 25), a2 = Load256(tile + 64 * 26);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  // The scales as in UnpackScalesQ3_K, lane by lane (16-bit shifts: the
  // bits crossing bytes are masked off): piece i's in byte i % 4 of sc[i / 4].
  const __m256i sc[4] = {
      _mm256_or_si256(_mm256_and_si256(a0, m4), _mm256_slli_epi16(_mm256_and_si256(a2, m2), 4)),
      _mm256_or_si256(_mm256_and_si256(a1, m4),
                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(a2, 2), m2), 4)),
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a0, 4), m4),
                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(a2, 4), m2), 4)),
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a1, 4), m4),
                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(a2, 6), m2), 4))};
  const __m256i three = _mm256_set1_epi8(7), one = _mm256_set1_epi8(1), bit2 = _mm256_set1_epi8(4),
                bits12 = _mm256_set1_epi8(6);
  // Pair sums of 3-bit values times int8 are at most 2 * 7 * 127 = 1778: a
  // piece's four vectors add up in int16. With VNNI they add up in int32
  // (at most 16 * 7 * 127, within int16) and one vpmaddwd scales them.
  __m256i a = _mm256_setzero_si256();
  #pragma GCC unroll 16
  for (int h = 0; h < 2; ++h) {
    #pragma GCC unroll 16
    for (int half = 0; half < 2; ++half) {
      fetch(2 * h + half);
      __m256i piece_sum[4];
      #pragma GCC unroll 16
      for (int g = 0; g < 4; ++g) piece_sum[g] = _mm256_setzero_si256();
      #pragma GCC unroll 16
      for (int i = 2 * half; i < 2 * half + 2; ++i) {
        // w[g][u]: the values 128h + 32g + 4(2i + u) + p of each row
        // (16-bit shifts: the bits crossing bytes are masked off).
        const uint8_t* lines = tile + 64 * 3 * (4 * h + i);
        const __m256i l0 = Load256(lines), l1 = Load256(lines + 64), l2 = Load256(lines + 128);
        const __m256i w[4][2] = {
            {_mm256_and_si256(l0, three), _mm256_and_si256(_mm256_srli_epi16(l0, 3), three)},
            {_mm256_and_si256(l1, three), _mm256_and_si256(_mm256_srli_epi16(l1, 3), three)},
            {_mm256_and_si256(l2, three), _mm256_and_si256(_mm256_srli_epi16(l2, 3), three)},
            {_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 6), m2),
                             _mm256_and_si256(_mm256_srli_epi16(l1, 4), bit2)),
             _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 7), one),
                             _mm256_and_si256(_mm256_srli_epi16(l2, 5), bits12))}};
        #pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) {
          #pragma GCC unroll 16
          for (int u = 0; u < 2; ++u) {
            const __m256i x = Dword(q + 128 * h + 32 * g + 4 * (2 * i + u));
            if constexpr (D::kVnni) {
              piece_sum[g] = DotAdd<D>(piece_sum[g], w[g][u], x);
            } else {
              piece_sum[g] = _mm256_add_epi16(piece_sum[g], _mm256_maddubs_epi16(w[g][u], x));
            }
          }
        }
      }
      #pragma GCC unroll 16
      for (int g = 0; g < 4; ++g) {
        const int piece = 8 * h + 2 * g + half;
        // With VNNI the int32 piece sum is its low int16 half, so the scale
        // goes in the low half of its lane with zero above: one vpmaddwd,
        // the exact product (vpmulld is two uops).
        __m256i scale = _mm256_sub_epi16(LaneByte16(sc[piece / 4], piece % 4), _mm256_set1_epi16(32));
        if constexpr (D::kVnni) scale = _mm256_blend_epi16(scale, _mm256_setzero_si256(), 0xAA);
        a = _mm256_add_epi32(a, _mm256_madd_epi16(piece_sum[g], scale));
      }
    }
  }
  // Less 4 sum_i sc_i s_i, two pieces per vpmaddwd (|sc_i s_i| <= 32 * 2032).
  __m256i c = _mm256_setzero_si256();
  #pragma GCC unroll 16
  for (int t = 0; t < 8; ++t) {
    const __m256i scales = _mm256_sub_epi16(LaneBytePair16(sc[t / 2], 2 * (t % 2)), _mm256_set1_epi16(32));
    c = _mm256_add_epi32(c, _mm256_madd_epi16(scales, Dword(sums.pieces + 2 * t)));
  }
  return _mm256_sub_epi32(a, _mm256_slli_epi32(c, 2));
}

// Q2_K's 8 rows against the activation's 256 values at q: A = sum_i sc_i
// sum w q over its 16 pieces of 16 and B = -sum_i m_i s_i, as FormatQ2_K.
// Tile lines 0-3 hold the scale (low nibble) and min (high) bytes, piece
// i's in byte i % 4 of line i / 4; lines 4-19 the 2-bit values as in the
// file (line 4 + 8h + j: bytes 32h + 4j.. of qs, value 128h + 32g + 4j + p
// in bits 2g, 2g+1 of byte p).
template <class D, class Fetch = NoFetch>
inline void X8SumsQ2_K(const uint8_t* tile, const int8_t* q, const SuperRowSums& sums, __m256i* a_out,
                       __m256i* b_out, const Fetch& fetch = {}) {
  const __m256i nibble = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  __m256i sc[4], mins[4];
  #pragma GCC unroll 16
  for (int l = 0; l < 4; ++l) {
    const __m256i v = Load256(tile + 64 * l);
    sc[l] = _mm256_and_si256(v, nibble);
    mins[l] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
  }
  // Pair sums of 2-bit values times int8 are at most 2 * 3 * 127: a piece's
  // four vectors add up in int16 (with VNNI in int32, within int16's
  // range, then one vpmaddwd).
  __m256i a = _mm256_setzero_si256();
  #pragma GCC unroll 16
  for (int h = 0; h < 2; ++h) {
    #pragma GCC unroll 16
    for (int half = 0; half < 2; ++half) {
      fetch(2 * h + half);
      __m256i piece_sum[4];
      #pragma GCC unroll 16
      for (int j = 4 * half; j < 4 * half + 4; ++j) {
        const __m256i v = Load256(tile + 64 * (4 + 8 * h + j));
        #pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) {
          const __m256i w = _mm256_and_si256(_mm256_srli_epi16(v, 2 * g), m2);
          const __m256i x = Dword(q + 128 * h + 32 * g + 4 * j);
          if constexpr (D::kVnni) {
            piece_sum[g] = DotAdd<D>(j == 4 * half ? _mm256_setzero_si256() : piece_sum[g], w, x);
          } else {
            const __m256i p = _mm256_maddubs_epi16(w, x);
            piece_sum[g] = j == 4 * half ? p : _mm256_add_epi16(piece_sum[g], p);
          }
        }
      }
      #pragma GCC unroll 16
      for (int g = 0; g < 4; ++g) {
        const int piece = 8 * h + 2 * g + half;
        // With VNNI the int32 piece sum is its low int16 half and the scale
        // (0-15) the low half of its lane: one vpmaddwd, the exact product.
        const __m256i scale =
            D::kVnni ? LaneByte32(sc[piece / 4], piece % 4) : LaneByte16(sc[piece / 4], piece % 4);
        a = _mm256_add_epi32(a, _mm256_madd_epi16(piece_sum[g], scale));
      }
    }
  }
  __m256i b = _mm256_setzero_si256();
  #pragma GCC unroll 16
  for (int t = 0; t < 8; ++t) {
    const __m256i pair = LaneBytePair16(mins[t / 2], 2 * (t % 2));
    b = _mm256_add_epi32(b, _mm256_madd_epi16(pair, Dword(sums.pieces + 2 * t)));
  }
  *a_out = a;
  *b_out = _mm256_sub_epi32(_mm256_setzero_si256(), b);
}

// IQ4_XS's sub-block s scale less 32 in each row's lane, as
// UnpackScaleIQ4_XS: its low 4 bits from the tile's first line
// (scales_l), its high 2 from the scales area (scales_h).
inline __m256i X8ScaleIQ4_XS(__m256i scales_l, __m256i scales_h, int s) {
  const __m256i low =
      _mm256_and_si256(_mm256_srli_epi32(scales_l, 8 * (s / 2) + 4 * (s % 2)), _mm256_set1_epi32(0x0F));
  const __m256i high = _mm256_and_si256(_mm256_srli_epi32(scales_h, 2 * s), _mm256_set1_epi32(3));
  return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
}

// IQ4_XS's 8 rows against the activation's 256 values at q: A = sum_s
// (ls_s - 32) sum w q over its 8 sub-blocks of 32, as FormatIQ4_XS. Tile
// line 0 holds the 4 bytes of low scale nibbles, lines 1-32 the index bytes
// as in the file (line 1 + 4s + j: bytes 16s + 4j.. of qs, values 32s + 4j
// + p in the low nibbles and 32s + 16 + 4j + p in the high ones);
// scales_h is each row's 16 bits of high scale bits, one row a lane. The
// signed table values are multiplied as IQ4_NL's (abs, sign onto the
// activation): pairs of products stay within int16.
template <class D, class Fetch = NoFetch>
inline __m256i X8SumsIQ4_XS(const uint8_t* tile, const int8_t* q, __m256i scales_h, const Fetch& fetch = {}) {
  const __m256i table = IQ4Table();
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i scales_l = Load256(tile);
  __m256i a = _mm256_setzero_si256();
  // One sub-block s. With 16 registers (AVX2, AVX-VNNI) GCC unrolls each
  // on its own: unrolled whole, the 4 groups of a decoding row spilled
  // (AVX2, one row in cache, 0.8x the rate; AVX-VNNI 0.9x); with AVX-512's
  // 32 they stay unrolled whole, which was faster there.
  auto sub_block = [&](int s) {
    if (s % 2 == 0) fetch(s / 2);
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = Load256(tile + 64 * (1 + 4 * s + j));
      const __m256i wl = _mm256_shuffle_epi8(table, _mm256_and_si256(v, nibble));
      const __m256i wh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
      sum = DotAdd<D>(sum, _mm256_abs_epi8(wl), _mm256_sign_epi8(Dword(q + 32 * s + 4 * j), wl));
      sum = DotAdd<D>(sum, _mm256_abs_epi8(wh), _mm256_sign_epi8(Dword(q + 32 * s + 16 + 4 * j), wh));
    }
    // At most 32 * 32 * 127 * 127 a sub-block: exact in int32.
    a = _mm256_add_epi32(a, _mm256_mullo_epi32(sum, X8ScaleIQ4_XS(scales_l, scales_h, s)));
  };
  if constexpr (D::kVnni && kManyVectorRegisters) {
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) sub_block(s);
  } else {
    for (int s = 0; s < 8; ++s) sub_block(s);
  }
  return a;
}

// One activation row against G consecutive groups of a k-quant's (or
// IQ4_XS's) x8 copy from g0 (see X8RowGroups): per super-block, acc =
// fma(d dx, A, acc), then fma(dmin dx, B, acc) for Q2_K/Q4_K/Q5_K, as
// Accumulate256.
template <class D, DType T, int G, bool kStream = true>
void X8SuperRowGroups(const QuantGemmArgs& a, int64_t g0, int64_t m) {
  constexpr bool kHasMin = T == DType::kQ2_K || T == DType::kQ4_K || T == DType::kQ5_K;
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(T);
  // The scales area: d, then dmin (or IQ4_XS's high scale bits), per row.
  constexpr int64_t stride = kHasMin || T == DType::kIQ4_XS ? 64 : 32;
  X8Group group[G];
  __m256 acc[G];
  for (int i = 0; i < G; ++i) {
    group[i] = GroupOf(a, g0 + i);
    acc[i] = _mm256_setzero_ps();
  }
  const int64_t next = (G + 1) / 2 * a.x8_pair_bytes;
  const int64_t ahead = next < kX8PrefetchMax ? next : kX8PrefetchMax;
  SuperRowSums sums;
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* q = a.x->row_q(m) + kQK_K * b;
    SetSubBlockSums(a.x->row_sums(m) + 16 * b, &sums);
    const __m256 dx = _mm256_set1_ps(a.x->row_d(m)[b]);
    for (int i = 0; i < G; ++i) {
      const uint8_t* tile = group[i].quants + tile_bytes * b;
      // The group's half of the next pair's lines, a quarter at the start
      // of each quarter of the sums: all at once, they went out in one
      // burst of 11-27 lines while the block's work waited.
      const uint8_t* lines = HalfLinesAhead(tile, g0 + i, ahead, tile_bytes);
      auto fetch = [&](int part) {
        if constexpr (kStream) PrefetchStreamedPart(lines, tile_bytes / 2, part, 4);
      };
      if constexpr (kStream) {
        // The pair's scale line too, as X8RowGroups' (Q4_K 6 rounds' median +3%, Q6_K +4%).
        if ((stride * b) % 64 == 0 && (g0 + i) % 2 == 0)
          PrefetchStreamed(group[i].scales + stride * b + ahead);
      }
      const uint8_t* scales = group[i].scales + stride * b;
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
      if constexpr (kHasMin) {
        __m256i sum_a, sum_b;
        if constexpr (T == DType::kQ2_K) {
          X8SumsQ2_K<D>(tile, q, sums, &sum_a, &sum_b, fetch);
        } else {
          X8SumsK45<D, T == DType::kQ5_K>(tile, q, sums, &sum_a, &sum_b, fetch);
        }
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32)));
        acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum_a), acc[i]);
        acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(dm, dx), _mm256_cvtepi32_ps(sum_b), acc[i]);
      } else {
        __m256i sum;
        if constexpr (T == DType::kIQ4_XS) {
          const __m256i high = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32)));
          sum = X8SumsIQ4_XS<D>(tile, q, high, fetch);
        } else if constexpr (T == DType::kQ3_K) {
          sum = X8SumsQ3_K<D>(tile, q, sums, fetch);
        } else {
          sum = X8SumsQ6_K<D>(tile, q, sums, fetch);
        }
        acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum), acc[i]);
      }
    }
  }
  for (int i = 0; i < G; ++i) {
    const int64_t n0 = (g0 + i) * kQuantGroupRows;
    const int n_valid = static_cast<int>(a.n_total - n0 < kQuantGroupRows ? a.n_total - n0 : kQuantGroupRows);
    StoreRow(a.y + m * a.ldy + n0, acc[i], a.bias != nullptr ? a.bias + n0 : nullptr, n_valid);
  }
}

// ---- Few rows on the x8 layout: verifying drafted tokens, small batches ----
//
// Each weight vector is loaded once and (Q8_0) its absolute value taken or
// (Q4_0) its nibbles unpacked once for all the rows of a tile, so that R
// rows cost one pass over the weights and R times the multiply-adds, not R
// passes. Every row's block sums are the exact integers of the one-row
// kernels and its fp32 steps are theirs in the same order, so each row gets
// the bits it gets alone.

// The most activation rows a tile takes: its per-row sums and accumulators
// stay in registers (32 vector registers with AVX-512, 16 with AVX2). With
// AVX2, 5 (4 drafted tokens and the next) one group at a time: measured
// against 3 and 2 rows two groups at a time, which loaded and unpacked each
// weight vector twice and spilled, Q4_0 1.6x and Q8_0 with VNNI 1.3x as
// fast on weights in cache (896 x 896, one thread).
#if defined(__AVX512F__)
constexpr int kFewRowsTile = 8;
#else
constexpr int kFewRowsTile = 5;
#endif

// Rows from m of a QuantizedRows' block-by-block copy: block b of tile row
// r has its 32 values at q + 32 (stride b + r), its sum negated at
// neg_sum[stride b + r] and its scale at d[stride b + r]. So the kernels
// address every row of a block from one pointer each (R rows of separate
// pointers overflow the general registers).
struct FewRows {
  const int8_t* q;
  const int32_t* neg_sum;
  const float* d;
  int64_t stride;
};

// The rows from m, all in m's tile of the copy (qkernel_table.h).
inline FewRows FewRowsFrom(const QuantizedRows& x, int64_t m) {
  const int64_t h = x.by_block_rows;
  const int64_t at = (m / h) * (x.k / kQK) * h + m % h;
  return {x.by_block + kQK * at, x.by_block_neg_sum + at, x.by_block_d + at, h};
}

// Q4_0's Dot2Nibbles added to acc: with VNNI two accumulating vpdpbusd.
template <class D>
inline __m256i Dot2NibblesAdd(__m256i acc, __m256i u1, __m256i s1, __m256i u2, __m256i s2) {
  return _mm256_add_epi32(acc, D::Dot2Nibbles(u1, s1, u2, s2));
}
#if defined(KILN_QGEMM_VNNI256)
template <>
inline __m256i Dot2NibblesAdd<DotVnni>(__m256i acc, __m256i u1, __m256i s1, __m256i u2, __m256i s2) {
  return Dpbusd256(Dpbusd256(acc, u1, s1), u2, s2);
}
#endif

// A tile of R rows (FewRows x; output rows from m) against G consecutive x8
// groups from g0, on 256-bit vectors.
template <class D, bool kQ8, int G, int R>
void X8FewRowsGroups(const QuantGemmArgs& a, const FewRows& x, int64_t g0, int64_t m) {
  const int64_t blocks = a.k / kQK;
  constexpr int64_t kTileBytes = kQ8 ? 512 : 256;
  X8Group group[G];
  __m256 acc[G][R];
  for (int i = 0; i < G; ++i) {
    group[i] = GroupOf(a, g0 + i);
    for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
  }
  const int64_t next = (G + 1) / 2 * a.x8_pair_bytes;
  const int64_t ahead = next < kX8PrefetchMax ? next : kX8PrefetchMax;
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* q = x.q + kQK * x.stride * b;
    for (int i = 0; i < G; ++i) {
      const uint8_t* tile = group[i].quants + kTileBytes * b;
      const uint8_t* lines = HalfLinesAhead(tile, g0 + i, ahead, kTileBytes);
      for (int64_t line = 0; line < kTileBytes / 2; line += 64) {
        PrefetchStreamed(lines + line);
      }
      __m256i sum[R];
      if constexpr (kQ8 && D::kVnni) {
        // As the 512-bit kernel: the weights biased by 128 as the unsigned
        // operand, the activation dword as the signed one, so no per-row
        // vpsignb; the bias comes off as 128 times the activation sum.
        for (int r = 0; r < R; ++r) sum[r] = _mm256_set1_epi32(x.neg_sum[x.stride * b + r] * 128);
        const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
        for (int j = 0; j < 8; ++j) {
          const __m256i u = _mm256_xor_si256(Load256(tile + 64 * j), flip);
          for (int r = 0; r < R; ++r) sum[r] = DotAdd<D>(sum[r], u, X8Dword(q + kQK * r, j));
        }
      } else if constexpr (kQ8) {
        for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
          const __m256i w = Load256(tile + 64 * j);
          const __m256i u = _mm256_abs_epi8(w);
          for (int r = 0; r < R; ++r) sum[r] = DotAdd<D>(sum[r], u, _mm256_sign_epi8(X8Dword(q + kQK * r, j), w));
        }
      } else if constexpr (D::kVnni) {
        // The nibbles' products less 8 times the block's activation sum.
        for (int r = 0; r < R; ++r) sum[r] = _mm256_set1_epi32(x.neg_sum[x.stride * b + r] * 8);
        X8ForEachQ4_0Vector(tile, [&](int j, __m256i low, __m256i high) {
          for (int r = 0; r < R; ++r) {
            sum[r] = Dot2NibblesAdd<D>(sum[r], low, X8Dword(q + kQK * r, j), high, X8Dword(q + kQK * r, 4 + j));
          }
        });
      } else {
        // Without VNNI the block's eight vpmaddubsw results are added in
        // int16 and widened by one vpmaddwd: each pair sum is at most
        // 2 * 15 * 127 = 3810 in magnitude, so eight make at most 30480,
        // exact in int16. Then less 8 times the block's activation sum.
        __m256i pairs[R];
        for (int r = 0; r < R; ++r) pairs[r] = _mm256_setzero_si256();
        X8ForEachQ4_0Vector(tile, [&](int j, __m256i low, __m256i high) {
          for (int r = 0; r < R; ++r) {
            pairs[r] = _mm256_add_epi16(pairs[r], _mm256_add_epi16(_mm256_maddubs_epi16(low, X8Dword(q + kQK * r, j)),
                                                                   _mm256_maddubs_epi16(high, X8Dword(q + kQK * r, 4 + j))));
          }
        });
        for (int r = 0; r < R; ++r) {
          sum[r] = _mm256_add_epi32(_mm256_madd_epi16(pairs[r], _mm256_set1_epi16(1)),
                                    _mm256_set1_epi32(x.neg_sum[x.stride * b + r] * 8));
        }
      }
      const __m256 dw = X8Scales(group[i], b);
      for (int r = 0; r < R; ++r) {
        acc[i][r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(x.d[x.stride * b + r])), _mm256_cvtepi32_ps(sum[r]),
                                    acc[i][r]);
      }
    }
  }
  for (int i = 0; i < G; ++i) {
    const int64_t n0 = (g0 + i) * kQuantGroupRows;
    const int n_valid = static_cast<int>(a.n_total - n0 < kQuantGroupRows ? a.n_total - n0 : kQuantGroupRows);
    const float* bias = a.bias != nullptr ? a.bias + n0 : nullptr;
    for (int r = 0; r < R; ++r) StoreRow(a.y + (m + r) * a.ldy + n0, acc[i][r], bias, n_valid);
  }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// With 512-bit VNNI, a pair of groups per vector: line j of a pair's block
// tile is both groups' vector j (quant_matrix.h), so one vpdpbusd does a
// pair's multiply-adds for one activation row. The activation dword is the
// broadcast operand, so it must be the signed one: the weights go in as the
// unsigned one, Q4_0's nibbles as they are and Q8_0's values biased by 128
// (w ^ 0x80), and the bias comes off as 8 (Q4_0) or 128 (Q8_0) times the
// block's activation sum. vpdpbusd adds in int32 without saturating, so
// the block sums are the exact integers of the 256-bit kernels.

// The 16 rows' outputs of pair p for output row m.
inline void StorePairRow(const QuantGemmArgs& a, int64_t p, int64_t m, __m512 acc) {
  const int64_t n0 = p * kX8PairRows;
  const int64_t left = a.n_total - n0;
  float* y = a.y + m * a.ldy + n0;
  const float* bias = a.bias != nullptr ? a.bias + n0 : nullptr;
  if (left >= kX8PairRows) {
    if (bias != nullptr) acc = _mm512_add_ps(acc, _mm512_loadu_ps(bias));
    _mm512_storeu_ps(y, acc);
    return;
  }
  const auto valid = static_cast<__mmask16>((1u << left) - 1);
  if (bias != nullptr) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(valid, bias));
  _mm512_mask_storeu_ps(y, valid, acc);
}

// How far ahead the pair kernels fetch: the next pair, at most kX8PrefetchMax.
inline int64_t NextPairDistance(const QuantGemmArgs& a) {
  return a.x8_pair_bytes < kX8PrefetchMax ? a.x8_pair_bytes : kX8PrefetchMax;
}

// Whether a k-quant pair kernel's tile of rows from m streams its weights
// from memory, fetching the next pair's lines (tiles and scales) ahead: the
// first tile of a few rows (decoding, verifying drafted tokens), which
// reads each pair before the tiles after it re-read it from cache. Without
// the fetches the 5 rows of a verification pass waited on memory: Q6_K's
// 896 x 4864 took 2.0x one row's time, 1.6x with them (Q4_K 1.52x ->
// 1.48x; an Intel Xeon with AMX, 2 threads).
inline bool FirstFewRowsTileStreams(const QuantGemmArgs& a, int64_t m) {
  return m == a.m_begin && a.m_end - a.m_begin <= kFewRowsTile;
}

// While a pair's block is multiplied (tile: its lines, tile_bytes of
// them), the next pair's lines of that block.
inline void PrefetchNextPairTile(const QuantGemmArgs& a, const uint8_t* tile, int64_t tile_bytes) {
  const int64_t ahead = NextPairDistance(a);
  for (int64_t line = 0; line < tile_bytes; line += 64) PrefetchStreamed(tile + ahead + line);
}

// The next pair's scale line of this block (scale_at its offset in the pair).
inline void PrefetchNextPairScales(const QuantGemmArgs& a, const uint8_t* pair, int64_t scale_at) {
  if (scale_at % 64 == 0) PrefetchStreamed(pair + scale_at + NextPairDistance(a));
}

// One activation row (decoding) streams the weights from memory faster
// than the hardware prefetcher fetches the scale lines: the next pair's
// tile lines of the block and, once per line of them, its scales
// (scale_at: the block's offset in the pair's scale area).
inline void PrefetchNextPairBlock(const QuantGemmArgs& a, const uint8_t* pair, const uint8_t* tile,
                                  int64_t tile_bytes, int64_t scale_at) {
  PrefetchNextPairTile(a, tile, tile_bytes);
  PrefetchNextPairScales(a, pair, scale_at);
}

// Slice `part` of `parts` of the next pair's tile lines of this block: a
// 256-value format's tile is 21-53 lines, and fetched all at once at the
// block's start they queued behind each other while the block's work
// waited; spread over its sub-blocks, one row of 896 x 4864 from memory
// (2 threads, an Intel Xeon with AMX) took Q4_K 130-138 -> 115-130 us,
// Q5_K 176 -> 145-152, Q6_K 183-197 -> 163-167, IQ4_XS 141-145 -> 117-119.
inline void PrefetchNextPairTilePart(const QuantGemmArgs& a, const uint8_t* tile, int64_t tile_bytes,
                                     int part, int parts) {
  PrefetchStreamedPart(tile + NextPairDistance(a), tile_bytes, part, parts);
}

// A tile of R rows (FewRows x; output rows from m) against pair p of a
// 32-value format on the x8 copy: Q8_0, Q4_0, Q5_0 (the nibbles with
// their fifth bits, 0-31, and 16 times the activation sum off), IQ4_NL
// (the nibbles looked up in the table biased by 128, and 128 times the sum
// off, as its 256-bit tiles with VNNI do), or Q4_1 and Q5_1 (Q4_0's and
// Q5_0's values with nothing off, then X8RowGroups' second fma of m times
// the activation sum). The block sums are exactly the integers of the
// one-row kernels and the fp32 steps theirs.
template <X8Format F, int R>
void X8FewRowsPair(const QuantGemmArgs& a, const FewRows& x, int64_t p, int64_t m) {
  constexpr bool kFifth = F == X8Format::kQ5_0 || F == X8Format::kQ5_1;
  constexpr bool kHasMin = F == X8Format::kQ4_1 || F == X8Format::kQ5_1;
  const int64_t blocks = a.k / kQK;
  constexpr int64_t kTileBytes = F == X8Format::kQ8_0 ? 512 : (kFifth ? 320 : 256);
  constexpr int64_t kScaleStride = kHasMin ? 64 : 32;
  constexpr int kBiasShift = F == X8Format::kQ4_0 ? 3 : (F == X8Format::kQ5_0 ? 4 : 7);
  constexpr bool kOddChains = R >= 2 && R <= 5;  // registers for 2 R sums; one row streams from memory
  const uint8_t* pair = a.x8 + p * a.x8_pair_bytes;
  const uint8_t* quants = pair + X8ScaleBytes(a.w_type, blocks);
  [[maybe_unused]] __m512i table;
  if constexpr (F == X8Format::kIQ4_NL) {
    table = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values))),
        _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = quants + kTileBytes * b;
    // The scale lines too, for any number of rows: fetched for one row
    // alone, a 5-row LM head (151936 x 896) waited on them, 4% of its time.
    PrefetchNextPairBlock(a, pair, tile, kTileBytes, kScaleStride * b);
    const int8_t* q = x.q + kQK * x.stride * b;
    // Each row's products in two chains (the second from zero), whose
    // exact int32 sums are added after: the chains' latency, not the
    // multiply-adds' throughput, bounded 5 rows (Q8_0 at 896 x 4864 from
    // memory: 1.25-1.27x a row's time -> 1.17-1.19x). Integer sums, so the
    // same bits.
    __m512i sum[R], odd[kOddChains ? R : 1];
    for (int r = 0; r < (kOddChains ? R : 1); ++r) odd[r] = _mm512_setzero_si512();
    auto add_second = [&](int r, __m512i u, __m512i s) {
      if constexpr (kOddChains) {
        odd[r] = _mm512_dpbusd_epi32(odd[r], u, s);
      } else {
        sum[r] = _mm512_dpbusd_epi32(sum[r], u, s);
      }
    };
    // The offset shifted as a scalar: a vector shift would take port 0,
    // which the multiply-adds saturate.
    for (int r = 0; r < R; ++r) {
      sum[r] = kHasMin ? _mm512_setzero_si512()
                       : _mm512_set1_epi32(x.neg_sum[x.stride * b + r] * (1 << kBiasShift));
    }
    auto dword = [&](int r, int j) {
      int32_t v;
      std::memcpy(&v, q + kQK * r + 4 * j, 4);
      return _mm512_set1_epi32(v);
    };
    if constexpr (F == X8Format::kQ8_0) {
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
      for (int j = 0; j < 8; j += 2) {
        const __m512i u0 = _mm512_xor_si512(_mm512_loadu_si512(tile + 64 * j), flip);
        const __m512i u1 = _mm512_xor_si512(_mm512_loadu_si512(tile + 64 * j + 64), flip);
        for (int r = 0; r < R; ++r) {
          sum[r] = _mm512_dpbusd_epi32(sum[r], u0, dword(r, j));
          add_second(r, u1, dword(r, j + 1));
        }
      }
    } else {
      const __m512i nibble = _mm512_set1_epi8(0x0F);
      [[maybe_unused]] __m512i qh;
      if constexpr (kFifth) qh = _mm512_loadu_si512(tile + 256);
      for (int j = 0; j < 4; ++j) {
        const __m512i v = _mm512_loadu_si512(tile + 64 * j);
        __m512i low = _mm512_and_si512(v, nibble);
        __m512i high = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
        if constexpr (kFifth) {
          // The fifth bit as 16 added to a nibble (0-15): an or.
          const __m512i sixteen = _mm512_set1_epi8(0x10);
          low = _mm512_mask_add_epi8(low, X8FifthBitMask(qh, 4 * j), low, sixteen);
          high = _mm512_mask_add_epi8(high, X8FifthBitMask(qh, 16 + 4 * j), high, sixteen);
        } else if constexpr (F == X8Format::kIQ4_NL) {
          low = _mm512_shuffle_epi8(table, low);
          high = _mm512_shuffle_epi8(table, high);
        }
        for (int r = 0; r < R; ++r) {
          sum[r] = _mm512_dpbusd_epi32(sum[r], low, dword(r, j));
          add_second(r, high, dword(r, 4 + j));
        }
      }
    }
    if constexpr (kOddChains) {
      for (int r = 0; r < R; ++r) sum[r] = _mm512_add_epi32(sum[r], odd[r]);
    }
    const __m512 dw = _mm512_cvtph_ps(Load256(pair + kScaleStride * b));
    [[maybe_unused]] __m512 dm;
    if constexpr (kHasMin) dm = _mm512_cvtph_ps(Load256(pair + kScaleStride * b + 32));
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(x.d[x.stride * b + r]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(sum[r]), acc[r]);
      if constexpr (kHasMin) {
        const __m512 q_sum = _mm512_set1_ps(static_cast<float>(-x.neg_sum[x.stride * b + r]));
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dm, dx), q_sum, acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) StorePairRow(a, p, m + r, acc[r]);
}
#endif

template <class D, DType T, int R>
void X8SharedTile(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                  int n_valid);

// The type of a format with 256-bit tiles of rows (X8SharedTile).
template <X8Format F>
constexpr DType X8SharedType() {
  static_assert(F != X8Format::kQ8_0 && F != X8Format::kQ4_0);
  switch (F) {
    case X8Format::kQ5_0: return DType::kQ5_0;
    case X8Format::kQ5_1: return DType::kQ5_1;
    case X8Format::kQ4_1: return DType::kQ4_1;
    default: return DType::kIQ4_NL;
  }
}

// Rows from m (at most 4) against group g on the row-major activations:
// Q5_0's and IQ4_NL's group that a range splits from its pair.
template <class D, X8Format F>
void X8SharedGroupRows(const QuantGemmArgs& a, int64_t g, int64_t m, int64_t rows) {
  const int64_t n0 = g * kQuantGroupRows;
  const int n_valid = static_cast<int>(a.n_total - n0 < kQuantGroupRows ? a.n_total - n0 : kQuantGroupRows);
  const X8Group group = GroupOf(a, g);
  const float* bias = a.bias != nullptr ? a.bias + n0 : nullptr;
  for (int64_t i = 0; i < rows;) {
    const int64_t r = rows - i < 4 ? rows - i : 4;
    float* y = a.y + (m + i) * a.ldy + n0;
    switch (r) {
      case 1: X8SharedTile<D, X8SharedType<F>(), 1>(a, group, m + i, y, bias, n_valid); break;
      case 2: X8SharedTile<D, X8SharedType<F>(), 2>(a, group, m + i, y, bias, n_valid); break;
      case 3: X8SharedTile<D, X8SharedType<F>(), 3>(a, group, m + i, y, bias, n_valid); break;
      default: X8SharedTile<D, X8SharedType<F>(), 4>(a, group, m + i, y, bias, n_valid); break;
    }
    i += r;
  }
}

// A tile of R rows from m over groups [g_begin, g_end): with 512-bit VNNI
// whole pairs on 512 bits, and a group whose pair the range splits (an odd
// end) on 256 (the last pair's second group may be past N, zeros in the
// copy: it is computed and not stored); otherwise two groups at a time, the
// two halves of each 64-byte line, or one where 5 rows leave no registers
// for a second group's accumulators (and Q8_0's 4, whose two groups
// spilled with AVX-VNNI). Q5_0, IQ4_NL, Q4_1 and Q5_1 come here with 512-bit
// VNNI only, a split pair's group on their 256-bit tiles.
template <class D, X8Format F, int R>
void X8FewRowsTile(const QuantGemmArgs& a, int64_t m) {
  constexpr bool kQ8 = F == X8Format::kQ8_0;
  constexpr bool kShared = !kQ8 && F != X8Format::kQ4_0;
  const FewRows x = FewRowsFrom(*a.x, m);
  int64_t g = a.g_begin;
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if constexpr (std::is_same_v<D, DotVnni>) {
    const int64_t groups = (a.n_total + kQuantGroupRows - 1) / kQuantGroupRows;
    auto odd = [&](int64_t group) {
      if constexpr (kShared) {
        X8SharedGroupRows<D, F>(a, group, m, R);
      } else {
        X8FewRowsGroups<D, kQ8, 1, R>(a, x, group, m);
      }
    };
    if (g % 2 != 0 && g < a.g_end) odd(g++);
    for (; g + 2 <= a.g_end || (g + 1 == a.g_end && a.g_end == groups); g += 2) {
      X8FewRowsPair<F, R>(a, x, g / 2, m);
    }
    if constexpr (kShared) {
      if (g < a.g_end) odd(g);
      return;
    }
  }
#endif
  if constexpr (!kShared) {  // (GemmAny sends the others only with 512-bit VNNI)
    if constexpr (R <= 4 && !kQ8) {
      for (; g + 2 <= a.g_end; g += 2) X8FewRowsGroups<D, kQ8, 2, R>(a, x, g, m);
    }
    for (; g < a.g_end; ++g) X8FewRowsGroups<D, kQ8, 1, R>(a, x, g, m);
  }
}

// Groups read by every tile of rows in turn while they are still in L2:
// a tile's pass over a whole thread share (megabytes for the MLP) would
// leave the next tile to read the weights from memory again. Even, so that
// the 512-bit kernel's pairs stay whole.
constexpr int64_t kFewRowsChunkGroups = 8;

// Rows [m_begin, m_end) in blocks of kRowBlock, and within each block the
// groups chunk by chunk of kFewRowsChunkGroups: body(chunk) with chunk's
// rows the block's and its groups the chunk's, so that every tile of the
// block's rows reads the chunk while it is in cache.
template <class Body>
void ForEachRowBlockChunk(const QuantGemmArgs& a, Body&& body) {
  for (int64_t mb = a.m_begin; mb < a.m_end;) {
    const int64_t block_end = (mb / kRowBlock + 1) * kRowBlock;
    QuantGemmArgs chunk = a;
    chunk.m_begin = mb;
    chunk.m_end = block_end < a.m_end ? block_end : a.m_end;
    for (int64_t g = a.g_begin; g < a.g_end; g = chunk.g_end) {
      const int64_t next = (g / kFewRowsChunkGroups + 1) * kFewRowsChunkGroups;
      chunk.g_begin = g;
      chunk.g_end = next < a.g_end ? next : a.g_end;
      body(chunk);
    }
    mb = chunk.m_end;
  }
}

// The sum of row m's 32 activation values of block b (32-value blocks),
// or of sub-block b of 32 (256-value blocks).
inline int32_t BlockSum32(const QuantGemmArgs& a, int64_t m, int64_t b) {
  const int16_t* s = a.x->row_sums(m) + 2 * b;
  return static_cast<int32_t>(s[0]) + s[1];
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// A pshufb mask taking the four bytes of `pattern` from every dword, on
// 512 bits (DwordBytes').
inline __m512i DwordBytes512(uint32_t pattern) {
  const __m512i base = _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C));
  return _mm512_or_si512(_mm512_set1_epi32(static_cast<int>(pattern)), base);
}

// The 4 bytes at `at` in every lane of a 512-bit vector.
inline __m512i Dword512(const void* at) {
  int32_t v;
  std::memcpy(&v, at, 4);
  return _mm512_set1_epi32(v);
}

// Q4_K's or Q5_K's pair p (16 rows, one int32 lane each) against R
// activation rows from m, each weight vector unpacked once for the R rows:
// per super-block and row, X8SumsK45's A (a sub-block's products added by
// vpdpbusd, scaled by one vpmulld) and B (the mins times the activation's
// sub-block sums), and X8SuperRowGroups' two fmas. Exact integers and the
// same fp32 steps: a row gets the bits it gets alone.
template <bool kFifth, int R>
void X8SuperPairK45(const QuantGemmArgs& a, int64_t p, int64_t m) {
  constexpr DType kType = kFifth ? DType::kQ5_K : DType::kQ4_K;
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(kType);
  const uint8_t* pair = a.x8 + p * a.x8_pair_bytes;
  const uint8_t* quants = pair + X8ScaleBytes(kType, blocks);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const bool streaming = FirstFewRowsTileStreams(a, m);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = quants + tile_bytes * b;
    if (streaming) PrefetchNextPairScales(a, pair, 64 * b);
    const __m512i a0 = _mm512_loadu_si512(tile), a1 = _mm512_loadu_si512(tile + 64),
                  a2 = _mm512_loadu_si512(tile + 128);
    const __m512i six = _mm512_set1_epi8(0x3F), four = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
    const __m512i sc[2] = {
        _mm512_and_si512(a0, six),
        _mm512_or_si512(_mm512_and_si512(a2, four), _mm512_and_si512(_mm512_srli_epi32(a0, 2), top))};
    const uint8_t* qh = tile + 64 * 3;
    const uint8_t* qs = tile + 64 * (kFifth ? 11 : 3);
    const int8_t* q[R];
    for (int r = 0; r < R; ++r) q[r] = a.x->row_q(m + r) + kQK_K * b;
    __m512i sum_a[R];
    for (int r = 0; r < R; ++r) sum_a[r] = _mm512_setzero_si512();
    // One sub-block pair c, all R rows. Q4_K's four are left to GCC, which
    // unrolls each one's 8 steps: unrolled whole (`unroll 16`) its 4-row
    // tile kept part of its sums on the stack, 0.90x the rate. Q5_K's stay
    // unrolled: its fifth bits' shifts depend on c.
    auto sub_blocks = [&](int c) {
      if (streaming) PrefetchNextPairTilePart(a, tile, tile_bytes, c, 4);
      const __m512i scale_low = _mm512_shuffle_epi8(sc[c / 2], DwordBytes512(0x80808000u | (2 * (c % 2))));
      const __m512i scale_high =
          _mm512_shuffle_epi8(sc[c / 2], DwordBytes512(0x80808000u | (2 * (c % 2) + 1)));
      __m512i low_sum[R], high_sum[R];
      for (int r = 0; r < R; ++r) low_sum[r] = high_sum[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int j = 0; j < 8; ++j) {
        const __m512i v = _mm512_loadu_si512(qs + 64 * (8 * c + j));
        __m512i low = _mm512_and_si512(v, nibble);
        __m512i high = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
        if constexpr (kFifth) {
          const __m512i fifth = _mm512_set1_epi8(0x10);
          const __m512i h = _mm512_loadu_si512(qh + 64 * j);
          const __m512i h0 = c < 2 ? _mm512_slli_epi16(h, 4 - 2 * c) : _mm512_srli_epi16(h, 2 * c - 4);
          const __m512i h1 = c < 2 ? _mm512_slli_epi16(h, 3 - 2 * c) : _mm512_srli_epi16(h, 2 * c - 3);
          low = _mm512_or_si512(low, _mm512_and_si512(h0, fifth));
          high = _mm512_or_si512(high, _mm512_and_si512(h1, fifth));
        }
        for (int r = 0; r < R; ++r) {
          low_sum[r] = _mm512_dpbusd_epi32(low_sum[r], low, Dword512(q[r] + 64 * c + 4 * j));
          high_sum[r] = _mm512_dpbusd_epi32(high_sum[r], high, Dword512(q[r] + 64 * c + 32 + 4 * j));
        }
      }
      for (int r = 0; r < R; ++r) {
        sum_a[r] = _mm512_add_epi32(sum_a[r], _mm512_add_epi32(_mm512_mullo_epi32(low_sum[r], scale_low),
                                                               _mm512_mullo_epi32(high_sum[r], scale_high)));
      }
    };
    if constexpr (kFifth) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) sub_blocks(c);
    } else {
      for (int c = 0; c < 4; ++c) sub_blocks(c);
    }
    const __m512i mins[2] = {_mm512_and_si512(a1, six),
                             _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), four),
                                             _mm512_and_si512(_mm512_srli_epi32(a1, 2), top))};
    const __m512 d = _mm512_cvtph_ps(Load256(pair + 64 * b));
    const __m512 dm = _mm512_cvtph_ps(Load256(pair + 64 * b + 32));
    for (int r = 0; r < R; ++r) {
      SuperRowSums sums;
      SetSubBlockSums(a.x->row_sums(m + r) + 16 * b, &sums);
      __m512i sum_b = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int t = 0; t < 4; ++t) {
        const auto k = static_cast<uint32_t>(2 * (t % 2));
        const __m512i pair16 =
            _mm512_shuffle_epi8(mins[t / 2], DwordBytes512(0x80008000u | ((k + 1) << 16) | k));
        sum_b = _mm512_add_epi32(sum_b, _mm512_madd_epi16(pair16, Dword512(sums.sub_blocks + 2 * t)));
      }
      sum_b = _mm512_sub_epi32(_mm512_setzero_si512(), sum_b);
      const __m512 dx = _mm512_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(sum_a[r]), acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dm, dx), _mm512_cvtepi32_ps(sum_b), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StorePairRow(a, p, m + r, acc[r]);
}

// Q6_K's pair p (16 rows, one int32 lane each) against R activation rows
// from m, each group of three lines unpacked into four 6-bit vectors once
// for the R rows: per super-block and row, X8SumsQ6_KRows' A (a piece's
// four vectors added by vpdpbusd, scaled by one vpmulld, less 32 times the
// scaled piece sums) and its fma. Exact integers and the same fp32 steps.
template <int R>
void X8SuperPairQ6_K(const QuantGemmArgs& a, int64_t p, int64_t m) {
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(DType::kQ6_K);
  const uint8_t* pair = a.x8 + p * a.x8_pair_bytes;
  const uint8_t* quants = pair + X8ScaleBytes(DType::kQ6_K, blocks);
  const __m512i six = _mm512_set1_epi8(0x3F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const bool streaming = FirstFewRowsTileStreams(a, m);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* values = quants + tile_bytes * b;
    if (streaming) PrefetchNextPairScales(a, pair, 32 * b);
    const uint8_t* scales = values + 64 * 48;
    const int8_t* q[R];
    for (int r = 0; r < R; ++r) q[r] = a.x->row_q(m + r) + kQK_K * b;
    __m512i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
    // One half of a 128-value half, all R rows. With more than 2 rows GCC
    // unrolls each on its own: unrolled whole (`unroll 16`), 4 rows spilled
    // their piece sums (0.63x the rate, 512 rows, one thread). One and two
    // rows (decoding, verifying) stay unrolled whole, which they fit.
    auto quarter = [&](int h, int half) {
      if (streaming) PrefetchNextPairTilePart(a, values, tile_bytes, 2 * h + half, 4);
      __m512i scale[4];
#pragma GCC unroll 16
      for (int v = 0; v < 4; ++v) {
        const int piece = 8 * h + 2 * v + half;
        const auto k = static_cast<uint32_t>(piece % 4);
        scale[v] = _mm512_srai_epi32(_mm512_shuffle_epi8(_mm512_loadu_si512(scales + 64 * (piece / 4)),
                                                         DwordBytes512((k << 24) | 0x808080u)),
                                     24);
      }
      __m512i piece_sum[R][4];
#pragma GCC unroll 16
      for (int u = 0; u < 4; ++u) {
        const int j = 4 * half + u;
        const uint8_t* group = values + 64 * 3 * (8 * h + j);
        const __m512i l0 = _mm512_loadu_si512(group), l1 = _mm512_loadu_si512(group + 64),
                      l2 = _mm512_loadu_si512(group + 128);
        const __m512i w3 = _mm512_or_si512(
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 6), _mm512_set1_epi8(0x03)),
                            _mm512_and_si512(_mm512_srli_epi16(l1, 4), _mm512_set1_epi8(0x0C))),
            _mm512_and_si512(_mm512_srli_epi16(l2, 2), _mm512_set1_epi8(0x30)));
        const __m512i w[4] = {_mm512_and_si512(l0, six), _mm512_and_si512(l1, six), _mm512_and_si512(l2, six),
                              w3};
#pragma GCC unroll 16
        for (int v = 0; v < 4; ++v) {
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            piece_sum[r][v] = _mm512_dpbusd_epi32(u == 0 ? _mm512_setzero_si512() : piece_sum[r][v], w[v],
                                                  Dword512(q[r] + 128 * h + 32 * v + 4 * j));
          }
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
        for (int v = 0; v < 4; ++v)
          sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(piece_sum[r][v], scale[v]));
      }
    };
    if constexpr (R <= 2) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) quarter(i / 2, i % 2);
    } else {
      for (int i = 0; i < 4; ++i) quarter(i / 2, i % 2);
    }
    const __m512 d = _mm512_cvtph_ps(Load256(pair + 32 * b));
    for (int r = 0; r < R; ++r) {
      const int16_t* pieces = a.x->row_sums(m + r) + 16 * b;
      __m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int t = 0; t < 8; ++t) {
        const auto k = static_cast<uint32_t>(2 * (t % 2));
        const __m512i pair16 = _mm512_srai_epi16(
            _mm512_shuffle_epi8(_mm512_loadu_si512(scales + 64 * (t / 2)),
                                DwordBytes512(((k + 1) << 24) | 0x00800000u | (k << 8) | 0x80u)),
            8);
        corr = _mm512_add_epi32(corr, _mm512_madd_epi16(pair16, Dword512(pieces + 2 * t)));
      }
      const __m512i total = _mm512_sub_epi32(sum[r], _mm512_slli_epi32(corr, 5));
      const __m512 dx = _mm512_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(total), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StorePairRow(a, p, m + r, acc[r]);
}

// IQ4_XS's pair p (16 rows, one int32 lane each) against R activation rows
// from m, each index vector looked up once for the R rows in the table
// biased by 128: per super-block and row, X8SumsIQ4_XSRows' A with VNNI
// (128 times each sub-block's activation sum off) and its fma. Exact
// integers and the same fp32 steps.
template <int R>
void X8SuperPairIQ4_XS(const QuantGemmArgs& a, int64_t p, int64_t m) {
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(DType::kIQ4_XS);
  const uint8_t* pair = a.x8 + p * a.x8_pair_bytes;
  const uint8_t* quants = pair + X8ScaleBytes(DType::kIQ4_XS, blocks);
  const __m512i biased =
      _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values))),
                       _mm512_set1_epi8(static_cast<char>(0x80)));
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const bool streaming = FirstFewRowsTileStreams(a, m);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = quants + tile_bytes * b;
    if (streaming) PrefetchNextPairScales(a, pair, 64 * b);
    const uint8_t* scales = pair + 64 * b;  // d, then the high scale bits
    const __m512i scales_l = _mm512_loadu_si512(tile);
    const __m512i scales_h = _mm512_cvtepu16_epi32(Load256(scales + 32));
    const int8_t* q[R];
    for (int r = 0; r < R; ++r) q[r] = a.x->row_q(m + r) + kQK_K * b;
    __m512i total[R];
    for (int r = 0; r < R; ++r) total[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      if (streaming) PrefetchNextPairTilePart(a, tile, tile_bytes, s, 8);
      __m512i sum[R];
      for (int r = 0; r < R; ++r) sum[r] = _mm512_set1_epi32(-128 * BlockSum32(a, m + r, 8 * b + s));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i v = _mm512_loadu_si512(tile + 64 * (1 + 4 * s + j));
        const __m512i wl = _mm512_shuffle_epi8(biased, _mm512_and_si512(v, nibble));
        const __m512i wh = _mm512_shuffle_epi8(biased, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
        for (int r = 0; r < R; ++r) {
          sum[r] = _mm512_dpbusd_epi32(sum[r], wl, Dword512(q[r] + 32 * s + 4 * j));
          sum[r] = _mm512_dpbusd_epi32(sum[r], wh, Dword512(q[r] + 32 * s + 16 + 4 * j));
        }
      }
      const __m512i low =
          _mm512_and_si512(_mm512_srli_epi32(scales_l, 8 * (s / 2) + 4 * (s % 2)), _mm512_set1_epi32(0x0F));
      const __m512i high = _mm512_and_si512(_mm512_srli_epi32(scales_h, 2 * s), _mm512_set1_epi32(3));
      const __m512i scale =
          _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32));
      for (int r = 0; r < R; ++r) total[r] = _mm512_add_epi32(total[r], _mm512_mullo_epi32(sum[r], scale));
    }
    const __m512 d = _mm512_cvtph_ps(Load256(scales));
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(total[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StorePairRow(a, p, m + r, acc[r]);
}

// Q2_K's pair p (16 rows, one int32 lane each) against R activation rows
// from m, each 2-bit vector unpacked once for the R rows: per super-block
// and row, X8SumsQ2_KRows' A (a piece's four vectors added by vpdpbusd,
// scaled by one vpmaddwd) and B, and X8SuperRowGroups' two fmas. Exact
// integers and the same fp32 steps: a row gets the bits it gets alone.
// (The pair kernels repeat their frame, pointers before and fmas after
// the sums: one frame taking the sums as a lambda kept less in registers,
// 5 rows of Q3_K 176 -> 207-213 us, Q4_K, Q6_K and IQ4_XS 3-7% slower.)
template <int R>
void X8SuperPairQ2_K(const QuantGemmArgs& a, int64_t p, int64_t m) {
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(DType::kQ2_K);
  const uint8_t* pair = a.x8 + p * a.x8_pair_bytes;
  const uint8_t* quants = pair + X8ScaleBytes(DType::kQ2_K, blocks);
  const __m512i nibble = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const bool streaming = FirstFewRowsTileStreams(a, m);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = quants + tile_bytes * b;
    if (streaming) PrefetchNextPairScales(a, pair, 64 * b);
    const int8_t* q[R];
    for (int r = 0; r < R; ++r) q[r] = a.x->row_q(m + r) + kQK_K * b;
    __m512i sum_a[R], sum_b[R];
    for (int r = 0; r < R; ++r) sum_a[r] = sum_b[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int piece = 0; piece < 16; ++piece) {
      if (streaming && piece % 4 == 0) PrefetchNextPairTilePart(a, tile, tile_bytes, piece / 4, 4);
      const int h = piece / 8, g = (piece % 8) / 2, half = piece % 2;
      __m512i sum[R];
      for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 4 * half; j < 4 * half + 4; ++j) {
        const __m512i w =
            _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(tile + 64 * (4 + 8 * h + j)), 2 * g), m2);
        for (int r = 0; r < R; ++r) {
          sum[r] = _mm512_dpbusd_epi32(sum[r], w, Dword512(q[r] + 128 * h + 32 * g + 4 * j));
        }
      }
      const __m512i sc = _mm512_and_si512(_mm512_loadu_si512(tile + 64 * (piece / 4)), nibble);
      const __m512i scale =
          _mm512_shuffle_epi8(sc, DwordBytes512(0x80808000u | static_cast<uint32_t>(piece % 4)));
      for (int r = 0; r < R; ++r) sum_a[r] = _mm512_add_epi32(sum_a[r], _mm512_madd_epi16(sum[r], scale));
    }
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const auto k = static_cast<uint32_t>(2 * (t % 2));
      const __m512i mins =
          _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(tile + 64 * (t / 2)), 4), nibble);
      const __m512i pair16 = _mm512_shuffle_epi8(mins, DwordBytes512(0x80008000u | ((k + 1) << 16) | k));
      for (int r = 0; r < R; ++r) {
        sum_b[r] = _mm512_sub_epi32(
            sum_b[r], _mm512_madd_epi16(pair16, Dword512(a.x->row_sums(m + r) + 16 * b + 2 * t)));
      }
    }
    const __m512 d = _mm512_cvtph_ps(Load256(pair + 64 * b));
    const __m512 dm = _mm512_cvtph_ps(Load256(pair + 64 * b + 32));
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(sum_a[r]), acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dm, dx), _mm512_cvtepi32_ps(sum_b[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StorePairRow(a, p, m + r, acc[r]);
}

// Q3_K's pair p (16 rows, one int32 lane each) against R activation rows
// from m, each 3-bit vector unpacked once for the R rows: per super-block
// and row, X8SumsQ3_KRows' A and X8SuperRowGroups' fma. Exact integers and
// the same fp32 steps.
template <int R>
void X8SuperPairQ3_K(const QuantGemmArgs& a, int64_t p, int64_t m) {
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(DType::kQ3_K);
  const uint8_t* pair = a.x8 + p * a.x8_pair_bytes;
  const uint8_t* quants = pair + X8ScaleBytes(DType::kQ3_K, blocks);
  const __m512i seven = _mm512_set1_epi8(7), m2 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(0x0F);
  const __m512i thirty_two = _mm512_set1_epi16(32);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const bool streaming = FirstFewRowsTileStreams(a, m);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = quants + tile_bytes * b;
    if (streaming) PrefetchNextPairScales(a, pair, 32 * b);
    // Pieces 4k..4k+3's 6-bit scales, as X8ScalesQ3_K.
    auto scales = [&](int k) {
      const __m512i low = _mm512_loadu_si512(tile + 64 * (24 + k % 2));
      const __m512i top = _mm512_loadu_si512(tile + 64 * 26);
      const __m512i low4 =
          k < 2 ? _mm512_and_si512(low, m4) : _mm512_and_si512(_mm512_srli_epi16(low, 4), m4);
      return _mm512_or_si512(low4, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(top, 2 * k), m2), 4));
    };
    const int8_t* q[R];
    for (int r = 0; r < R; ++r) q[r] = a.x->row_q(m + r) + kQK_K * b;
    __m512i total[R];
    for (int r = 0; r < R; ++r) total[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int piece = 0; piece < 16; ++piece) {
      if (streaming && piece % 4 == 0) PrefetchNextPairTilePart(a, tile, tile_bytes, piece / 4, 4);
      const int h = piece / 8, g = (piece % 8) / 2, half = piece % 2;
      __m512i sum[R];
      for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
#pragma GCC unroll 2
      for (int i = 2 * half; i < 2 * half + 2; ++i) {
        const uint8_t* lines = tile + 64 * 3 * (4 * h + i);
        __m512i w[2];
        if (g < 3) {
          const __m512i l = _mm512_loadu_si512(lines + 64 * g);
          w[0] = _mm512_and_si512(l, seven);
          w[1] = _mm512_and_si512(_mm512_srli_epi16(l, 3), seven);
        } else {
          const __m512i l0 = _mm512_loadu_si512(lines), l1 = _mm512_loadu_si512(lines + 64),
                        l2 = _mm512_loadu_si512(lines + 128);
          w[0] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 6), m2),
                                 _mm512_and_si512(_mm512_srli_epi16(l1, 4), _mm512_set1_epi8(4)));
          w[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 7), _mm512_set1_epi8(1)),
                                 _mm512_and_si512(_mm512_srli_epi16(l2, 5), _mm512_set1_epi8(6)));
        }
#pragma GCC unroll 2
        for (int u = 0; u < 2; ++u) {
          for (int r = 0; r < R; ++r) {
            sum[r] = _mm512_dpbusd_epi32(sum[r], w[u], Dword512(q[r] + 128 * h + 32 * g + 4 * (2 * i + u)));
          }
        }
      }
      // The scale less 32 in the low int16 half of each lane, zero above:
      // the piece's int32 sum is within int16, so one vpmaddwd is the product.
      const auto k = static_cast<uint32_t>(piece % 4);
      const __m512i scale = _mm512_maskz_sub_epi16(
          0x55555555u, _mm512_shuffle_epi8(scales(piece / 4), DwordBytes512(0x80008000u | (k << 16) | k)),
          thirty_two);
      for (int r = 0; r < R; ++r) total[r] = _mm512_add_epi32(total[r], _mm512_madd_epi16(sum[r], scale));
    }
    // Less 4 sum_i sc_i s_i, as X8SumsQ3_K.
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const auto k = static_cast<uint32_t>(2 * (t % 2));
      const __m512i pair16 = _mm512_sub_epi16(
          _mm512_shuffle_epi8(scales(t / 2), DwordBytes512(0x80008000u | ((k + 1) << 16) | k)), thirty_two);
      for (int r = 0; r < R; ++r) {
        const __m512i c = _mm512_madd_epi16(pair16, Dword512(a.x->row_sums(m + r) + 16 * b + 2 * t));
        total[r] = _mm512_sub_epi32(total[r], _mm512_slli_epi32(c, 2));
      }
    }
    const __m512 d = _mm512_cvtph_ps(Load256(pair + 32 * b));
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(total[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StorePairRow(a, p, m + r, acc[r]);
}

// Rows from m against pair p on T's pair kernel.
template <DType T, int R>
void X8SuperPair(const QuantGemmArgs& a, int64_t p, int64_t m) {
  if constexpr (T == DType::kQ6_K) {
    X8SuperPairQ6_K<R>(a, p, m);
  } else if constexpr (T == DType::kIQ4_XS) {
    X8SuperPairIQ4_XS<R>(a, p, m);
  } else if constexpr (T == DType::kQ2_K) {
    X8SuperPairQ2_K<R>(a, p, m);
  } else if constexpr (T == DType::kQ3_K) {
    X8SuperPairQ3_K<R>(a, p, m);
  } else {
    X8SuperPairK45<T == DType::kQ5_K, R>(a, p, m);
  }
}

// A k-quant's or IQ4_XS's rows [m_begin, m_end) over groups [g_begin, g_end): row
// blocks of kRowBlock, within each the groups chunk by chunk of
// kFewRowsChunkGroups, read (from cache after the first) by tiles of 4
// rows (5 where five are left) on whole pairs; a group that the range splits from its pair goes
// row by row through the one-row kernel (the same bits).
template <class D, DType T>
void X8SuperPairRows(const QuantGemmArgs& a) {
  // Q6_K's tile takes 4 rows too since GCC unrolls it one half-group at a
  // time: unrolled whole, its four piece sums a row spilled at 4 rows.
  constexpr int64_t kRows = 4;
  const int64_t groups = (a.n_total + kQuantGroupRows - 1) / kQuantGroupRows;
  ForEachRowBlockChunk(a, [&](const QuantGemmArgs& chunk) {
    for (int64_t m = chunk.m_begin; m < chunk.m_end;) {
      // Five rows left (a verification pass's k + 1) go as one tile: as 4
      // and 1, every weight vector was unpacked twice, which cost a 5-row
      // 896 x 4864 layer 13-17% of its time (Q4_K 184 -> 161 us, Q6_K
      // 278 -> 239, IQ4_XS 185 -> 153; weights from memory, 2 threads).
      const int64_t left = chunk.m_end - m;
      const int64_t r = left == 5 ? 5 : (left < kRows ? left : kRows);
      auto alone = [&](int64_t g) {
        for (int64_t i = 0; i < r; ++i) X8SuperRowGroups<D, T, 1, false>(a, g, m + i);
      };
      int64_t g = chunk.g_begin;
      if (g % 2 != 0) alone(g++);
      for (; g + 2 <= chunk.g_end || (g + 1 == chunk.g_end && chunk.g_end == groups); g += 2) {
        switch (r) {
          case 1: X8SuperPair<T, 1>(a, g / 2, m); break;
          case 2: X8SuperPair<T, 2>(a, g / 2, m); break;
          case 3: X8SuperPair<T, 3>(a, g / 2, m); break;
          case 5: X8SuperPair<T, 5>(a, g / 2, m); break;
          default: X8SuperPair<T, 4>(a, g / 2, m); break;
        }
      }
      if (g < chunk.g_end) alone(g);
      m += r;
    }
  });
}
#endif

// Rows [m_begin, m_end), all in one tile of the block-by-block copy, over
// groups [g_begin, g_end), in as few tiles of as even a size as the
// registers allow (9 rows with AVX2: 5 and 4; 16: four of 4).
template <class D, X8Format F>
void X8RowTiles(const QuantGemmArgs& a) {
  const int64_t rows = a.m_end - a.m_begin;
  const int64_t tiles = (rows + kFewRowsTile - 1) / kFewRowsTile;
  int64_t m = a.m_begin;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r = (a.m_end - m) / (tiles - t);
    switch (r) {
      case 1: X8FewRowsTile<D, F, 1>(a, m); break;
      case 2: X8FewRowsTile<D, F, 2>(a, m); break;
      case 3: X8FewRowsTile<D, F, 3>(a, m); break;
#if defined(__AVX512F__)
      case 4: X8FewRowsTile<D, F, 4>(a, m); break;
      case 5: X8FewRowsTile<D, F, 5>(a, m); break;
      case 6: X8FewRowsTile<D, F, 6>(a, m); break;
      case 7: X8FewRowsTile<D, F, 7>(a, m); break;
      default: X8FewRowsTile<D, F, 8>(a, m); break;
#else
      case 4: X8FewRowsTile<D, F, 4>(a, m); break;
      default: X8FewRowsTile<D, F, 5>(a, m); break;
#endif
    }
    m += r;
  }
}

// Rows [m_begin, m_end) (any number; each tile of the copy's rows taken
// apart) in blocks of kRowBlock: within a block, the groups chunk by chunk
// of kFewRowsChunkGroups, each chunk read by every tile of the block's rows
// while it is in cache. Each row's block sums and fp32 steps are those of
// the one-row kernel, so a row gets the bits it gets alone.
template <class D, X8Format F>
void X8RowBlocks(const QuantGemmArgs& a) {
  const int64_t h = a.x->by_block_rows;
  ForEachRowBlockChunk(a, [&](const QuantGemmArgs& chunk) {
    QuantGemmArgs tile = chunk;
    for (int64_t m = chunk.m_begin; m < chunk.m_end; m = tile.m_end) {
      const int64_t tile_end = (m / h + 1) * h;
      tile.m_begin = m;
      tile.m_end = tile_end < chunk.m_end ? tile_end : chunk.m_end;
      X8RowTiles<D, F>(tile);
    }
  });
}

// One activation row (decoding) over the x8 copy's groups [g_begin, g_end),
// four at a time.
template <class D, X8Format F>
void X8Row(const QuantGemmArgs& a) {
  int64_t g = a.g_begin;
  for (; g + 4 <= a.g_end; g += 4) X8RowGroups<D, F, 4>(a, g, a.m_begin);
  // The groups left go together too: one group alone is one chain.
  switch (a.g_end - g) {
    case 3: X8RowGroups<D, F, 3>(a, g, a.m_begin); break;
    case 2: X8RowGroups<D, F, 2>(a, g, a.m_begin); break;
    case 1: X8RowGroups<D, F, 1>(a, g, a.m_begin); break;
    default: break;
  }
}

// X8Row for a k-quant (or IQ4_XS).
template <class D, DType T>
void X8SuperRow(const QuantGemmArgs& a) {
  int64_t g = a.g_begin;
  for (; g + 4 <= a.g_end; g += 4) X8SuperRowGroups<D, T, 4>(a, g, a.m_begin);
  switch (a.g_end - g) {
    case 3: X8SuperRowGroups<D, T, 3>(a, g, a.m_begin); break;
    case 2: X8SuperRowGroups<D, T, 2>(a, g, a.m_begin); break;
    case 1: X8SuperRowGroups<D, T, 1>(a, g, a.m_begin); break;
    default: break;
  }
}

// As Gemm, over the x8 copy.
template <class D, bool kQ8>
void GemmX8(const QuantGemmArgs& a) {
  if (a.m_end - a.m_begin == 1) return X8Row<D, kQ8 ? X8Format::kQ8_0 : X8Format::kQ4_0>(a);
  // Without VNNI, many rows stay on the pairs of rows below: there the
  // tiles' int16 sums and extra widening made prefill a third slower (AMD
  // Zen 5 under KILN_ISA=avx2: Q4_0 212 -> 139 GOP/s, Q8_0 167 -> 133).
  if (a.x->by_block != nullptr && (D::kVnni || a.m_end - a.m_begin <= 2 * kFewRowsTile)) {
    constexpr X8Format kFormat = kQ8 ? X8Format::kQ8_0 : X8Format::kQ4_0;
    return X8RowBlocks<D, kFormat>(a);
  }
  const bool few_blocks = a.m_end - a.m_begin <= kRowBlock;
  for (int64_t mb = a.m_begin; mb < a.m_end; mb += kRowBlock) {
    const int64_t me = mb + kRowBlock < a.m_end ? mb + kRowBlock : a.m_end;
    for (int64_t g = a.g_begin; g < a.g_end; ++g) {
      const int64_t n0 = g * kQuantGroupRows;
      const int n_valid = static_cast<int>(a.n_total - n0 < kQuantGroupRows ? a.n_total - n0 : kQuantGroupRows);
      const X8Group group = GroupOf(a, g);
      // Rows in one block (a batch decoding) read each group from memory
      // in their first tile, which fetches the next pair ahead: without, 16
      // rows took 1.15-1.3x their time on weights in cache (AVX2, 2
      // threads, 4864 x 896 from memory: Q8_0 875-897 -> 802-822 us, Q4_0
      // 658-704 -> 614-643). Prefill's many row blocks gain nothing.
      const X8Group first = few_blocks ? WithNextPairFetched(a, group, g, kQ8 ? 512 : 256) : group;
      const float* bias = a.bias != nullptr ? a.bias + n0 : nullptr;
      for (int64_t m = mb; m < me; m += kRowTile) {
        const int r = static_cast<int>(me - m < kRowTile ? me - m : kRowTile);
        if (few_blocks && m == mb) {
          X8TileFetchingAhead<D, kQ8>(r, a, first, m, a.y + m * a.ldy + n0, bias, n_valid);
        } else {
          X8Tile<D, kQ8>(r, a, group, m, a.y + m * a.ldy + n0, bias, n_valid);
        }
      }
    }
  }
}

// ---- Many rows of the x8 copy but Q8_0's and Q4_0's: rows sharing each vector --
//
// Their one-row kernels, run row by row, unpack every weight vector once
// per row (Q6_K: three lines into four 6-bit vectors and a signed scale
// per piece; Q5_0, Q5_1 and Q5_K: the fifth bits into each nibble vector;
// Q4_1 and Q4_K: the nibbles masked; IQ4_NL and IQ4_XS: each nibble looked
// up in its table; Q3_K and Q2_K: the 3- and 2-bit fields shifted out),
// which made them slower than the row kernels (5 rows of Q4_K and Q5_K
// 2.2-2.4x one row's time from memory, Q5_1 3.1x, Q2_K and Q3_K in cache
// 4.7-4.9x, AVX2 and AVX-VNNI). These tiles unpack each vector once for
// kX8SharedRows rows. Each row's block sums are the one-row kernel's exact
// integers (the same int16 runs; int32 sums of exact products) and its fp32
// steps are the one-row kernel's in the same order, so a row gets the bits
// it gets alone, whatever the batch. (With 512-bit VNNI, the 32-value
// formats take the few-row tiles on pairs of groups instead, and the
// k-quants and IQ4_XS the pair tiles, GemmAny.)
// Rows per tile: four (5 where five are left). Q6_K's took two with AVX2's
// 16 registers until its rows went one piece at a time (X8SumsQ6_KRows):
// 5 rows of 896 x 4864 from memory then 450 -> 350 us, AVX2 and AVX-VNNI,
// and 128 in cache 1.37x faster.
constexpr int kX8SharedRows = 4;

// Vector 3 of a Q6_K tile's group of three lines (vectors 0-2 are each
// line's low 6 bits): their top 2 bits, as bits 0-1, 2-3 and 4-5.
inline __m256i X8FourthQ6_K(__m256i l0, __m256i l1, __m256i l2) {
  return _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 6), _mm256_set1_epi8(0x03)),
                                         _mm256_and_si256(_mm256_srli_epi16(l1, 4), _mm256_set1_epi8(0x0C))),
                         _mm256_and_si256(_mm256_srli_epi16(l2, 2), _mm256_set1_epi8(0x30)));
}

// Q6_K's 8 rows against R activation rows, each unpacked weight vector used
// for every row: row r's 256 values at q[r], its 16 piece sums at
// pieces[r], and its A = sum_i sc_i (sum w q - 32 s_i) over the 16 pieces
// of 16 into out[r]. A row's steps are the same whatever R is.
template <class D, int R, class Fetch>
inline void X8SumsQ6_KRows(const uint8_t* tile, const int8_t* const q[R], const int16_t* const pieces[R],
                           __m256i out[R], const Fetch& fetch) {
  const uint8_t* values = tile;
  const uint8_t* scales = tile + 64 * 48;
  const __m256i six = _mm256_set1_epi8(0x3F);
  __m256i a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_si256();
  // One half of a 128-value half. Without VNNI GCC unrolls each on its
  // own: unrolled whole, a decoding row spilled (AVX2, one row in cache,
  // 0.85x the rate); with VNNI they stay unrolled whole.
  auto quarter = [&](int h, int half) {
    __m256i scale[4];
#pragma GCC unroll 16
    for (int v = 0; v < 4; ++v) {
      const int piece = 8 * h + 2 * v + half;
      const __m256i line = Load256(scales + 64 * (piece / 4));
      scale[v] = D::kVnni ? LaneSignedByte32(line, piece % 4) : LaneSignedByte16(line, piece % 4);
    }
    // Pair sums of 6-bit values times int8 are at most 16002: two vectors
    // add up in int16. With VNNI a piece's four add up in int32 and one
    // vpmulld scales them (at most 16 * 63 * 127 * 128: exact).
    constexpr int kRun = D::kVnni ? 4 : 2;
      #pragma GCC unroll 16
    for (int j = 4 * half; j < 4 * half + 4; j += kRun) {
      __m256i piece_sum[R][4];
        #pragma GCC unroll 16
      for (int u = 0; u < kRun; ++u) {
        const uint8_t* group = values + 64 * 3 * (8 * h + j + u);
        const __m256i l0 = Load256(group), l1 = Load256(group + 64), l2 = Load256(group + 128);
        const __m256i w[4] = {_mm256_and_si256(l0, six), _mm256_and_si256(l1, six), _mm256_and_si256(l2, six),
                              X8FourthQ6_K(l0, l1, l2)};
#pragma GCC unroll 16
        for (int v = 0; v < 4; ++v) {
            #pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const __m256i x = Dword(q[r] + 128 * h + 32 * v + 4 * (j + u));
            if constexpr (D::kVnni) {
              piece_sum[r][v] = DotAdd<D>(u == 0 ? _mm256_setzero_si256() : piece_sum[r][v], w[v], x);
            } else {
              const __m256i p = _mm256_maddubs_epi16(w[v], x);
              piece_sum[r][v] = u == 0 ? p : _mm256_add_epi16(piece_sum[r][v], p);
            }
          }
        }
      }
        #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
          #pragma GCC unroll 16
        for (int v = 0; v < 4; ++v) {
          a[r] = _mm256_add_epi32(a[r], D::kVnni ? _mm256_mullo_epi32(piece_sum[r][v], scale[v])
                                                 : _mm256_madd_epi16(piece_sum[r][v], scale[v]));
        }
      }
    }
  };
  // With 16 registers (AVX2, AVX-VNNI), 2 or more rows go one piece at a
  // time (its scale, then each run of vectors unpacked for that piece
  // alone): a quarter's four piece sums and scales a row, with the lines,
  // kept 59 (AVX2) and 350 (AVX-VNNI) vectors a quarter on the stack. The
  // same runs and the same exact int32 sums.
  auto quarter_by_piece = [&](int h, int half) {
    constexpr int kRun = D::kVnni ? 4 : 2;
    for (int v = 0; v < 4; ++v) {
      const int piece = 8 * h + 2 * v + half;
      const __m256i line = Load256(scales + 64 * (piece / 4));
      const __m256i scale = D::kVnni ? LaneSignedByte32(line, piece % 4) : LaneSignedByte16(line, piece % 4);
      for (int j = 4 * half; j < 4 * half + 4; j += kRun) {
        __m256i piece_sum[R];
        for (int u = 0; u < kRun; ++u) {
          const uint8_t* group = values + 64 * 3 * (8 * h + j + u);
          const __m256i w = v < 3 ? _mm256_and_si256(Load256(group + 64 * v), six)
                                  : X8FourthQ6_K(Load256(group), Load256(group + 64), Load256(group + 128));
          for (int r = 0; r < R; ++r) {
            const __m256i x = Dword(q[r] + 128 * h + 32 * v + 4 * (j + u));
            if constexpr (D::kVnni) {
              piece_sum[r] = DotAdd<D>(u == 0 ? _mm256_setzero_si256() : piece_sum[r], w, x);
            } else {
              const __m256i p = _mm256_maddubs_epi16(w, x);
              piece_sum[r] = u == 0 ? p : _mm256_add_epi16(piece_sum[r], p);
            }
          }
        }
        for (int r = 0; r < R; ++r) {
          a[r] = _mm256_add_epi32(a[r], D::kVnni ? _mm256_mullo_epi32(piece_sum[r], scale)
                                                 : _mm256_madd_epi16(piece_sum[r], scale));
        }
      }
    }
  };
  if constexpr (R >= 2 && (!D::kVnni || !kManyVectorRegisters)) {
    for (int i = 0; i < 4; ++i) {
      fetch(i);
      quarter_by_piece(i / 2, i % 2);
    }
  } else if constexpr (D::kVnni) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      fetch(i);
      quarter(i / 2, i % 2);
    }
  } else {
    for (int i = 0; i < 4; ++i) {
      fetch(i);
      quarter(i / 2, i % 2);
    }
  }
  __m256i corr[R];
  for (int r = 0; r < R; ++r) corr[r] = _mm256_setzero_si256();
  #pragma GCC unroll 16
  for (int t = 0; t < 8; ++t) {
    const __m256i pair = LaneSignedBytePair16(Load256(scales + 64 * (t / 2)), 2 * (t % 2));
    for (int r = 0; r < R; ++r) corr[r] = _mm256_add_epi32(corr[r], _mm256_madd_epi16(pair, Dword(pieces[r] + 2 * t)));
  }
  for (int r = 0; r < R; ++r) out[r] = _mm256_sub_epi32(a[r], _mm256_slli_epi32(corr[r], 5));
}

// Q2_K's 8 rows against R activation rows, each 2-bit vector unpacked once
// for every row: row r's 256 values at q[r], its 16 piece sums at
// pieces[r], and its A and B (X8SumsQ2_K's) into a_out[r] and b_out[r].
// One piece at a time (its four vectors' products, then its scale), so
// that R rows' piece sums stay in AVX2's 16 registers: the same exact
// integers as the one-row kernel's four pieces at once.
template <class D, int R>
inline void X8SumsQ2_KRows(const uint8_t* tile, const int8_t* const q[R], const int16_t* const pieces[R],
                           __m256i a_out[R], __m256i b_out[R]) {
  const __m256i nibble = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  for (int r = 0; r < R; ++r) a_out[r] = _mm256_setzero_si256();
#pragma GCC unroll 16
  for (int piece = 0; piece < 16; ++piece) {
    const int h = piece / 8, g = (piece % 8) / 2, half = piece % 2;
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();  // (set by the first vector)
#pragma GCC unroll 4
    for (int j = 4 * half; j < 4 * half + 4; ++j) {
      const __m256i w = _mm256_and_si256(_mm256_srli_epi16(Load256(tile + 64 * (4 + 8 * h + j)), 2 * g), m2);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i x = Dword(q[r] + 128 * h + 32 * g + 4 * j);
        if constexpr (D::kVnni) {
          sum[r] = DotAdd<D>(j == 4 * half ? _mm256_setzero_si256() : sum[r], w, x);
        } else {
          const __m256i p = _mm256_maddubs_epi16(w, x);
          sum[r] = j == 4 * half ? p : _mm256_add_epi16(sum[r], p);
        }
      }
    }
    // With VNNI the piece's int32 sum (at most 16 * 3 * 127) is its low
    // int16 half, and the scale (0-15) the low half of its lane with zero
    // above: one vpmaddwd is the exact product (vpmulld: two uops).
    const __m256i sc = _mm256_and_si256(Load256(tile + 64 * (piece / 4)), nibble);
    const __m256i scale = D::kVnni ? LaneByte32(sc, piece % 4) : LaneByte16(sc, piece % 4);
    for (int r = 0; r < R; ++r) a_out[r] = _mm256_add_epi32(a_out[r], _mm256_madd_epi16(sum[r], scale));
  }
  for (int r = 0; r < R; ++r) b_out[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int t = 0; t < 8; ++t) {
    const __m256i mins = _mm256_and_si256(_mm256_srli_epi16(Load256(tile + 64 * (t / 2)), 4), nibble);
    const __m256i pair = LaneBytePair16(mins, 2 * (t % 2));
    for (int r = 0; r < R; ++r)
      b_out[r] = _mm256_sub_epi32(b_out[r], _mm256_madd_epi16(pair, Dword(pieces[r] + 2 * t)));
  }
}

// A Q3_K tile's 6-bit scales of pieces 4k..4k+3 (bytes 0-3 of each lane),
// as X8SumsQ3_K unpacks them from lines 24-26.
inline __m256i X8ScalesQ3_K(const uint8_t* tile, int k) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  const __m256i low = Load256(tile + 64 * (24 + k % 2));
  const __m256i top = Load256(tile + 64 * 26);
  const __m256i low4 = k < 2 ? _mm256_and_si256(low, m4) : _mm256_and_si256(_mm256_srli_epi16(low, 4), m4);
  return _mm256_or_si256(low4, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(top, 2 * k), m2), 4));
}

// Q3_K's 8 rows against R activation rows, each 3-bit vector unpacked once
// for every row: row r's 256 values at q[r], its 16 piece sums at
// pieces[r], and its A (X8SumsQ3_K's) into out[r]. One piece at a time, as
// X8SumsQ2_KRows: the same exact integers.
template <class D, int R>
inline void X8SumsQ3_KRows(const uint8_t* tile, const int8_t* const q[R], const int16_t* const pieces[R],
                           __m256i out[R]) {
  const __m256i seven = _mm256_set1_epi8(7), m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1),
                bit2 = _mm256_set1_epi8(4), bits12 = _mm256_set1_epi8(6);
  for (int r = 0; r < R; ++r) out[r] = _mm256_setzero_si256();
#pragma GCC unroll 16
  for (int piece = 0; piece < 16; ++piece) {
    const int h = piece / 8, g = (piece % 8) / 2, half = piece % 2;
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();  // (set by the first vector)
#pragma GCC unroll 2
    for (int i = 2 * half; i < 2 * half + 2; ++i) {
      // Values 128h + 32g + 4(2i + u) + p of each row, as X8SumsQ3_K's w[g][u].
      const uint8_t* lines = tile + 64 * 3 * (4 * h + i);
      __m256i w[2];
      if (g < 3) {
        const __m256i l = Load256(lines + 64 * g);
        w[0] = _mm256_and_si256(l, seven);
        w[1] = _mm256_and_si256(_mm256_srli_epi16(l, 3), seven);
      } else {
        const __m256i l0 = Load256(lines), l1 = Load256(lines + 64), l2 = Load256(lines + 128);
        w[0] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 6), m2),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), bit2));
        w[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 7), one),
                               _mm256_and_si256(_mm256_srli_epi16(l2, 5), bits12));
      }
#pragma GCC unroll 2
      for (int u = 0; u < 2; ++u) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i x = Dword(q[r] + 128 * h + 32 * g + 4 * (2 * i + u));
          const bool first = i == 2 * half && u == 0;
          if constexpr (D::kVnni) {
            sum[r] = DotAdd<D>(first ? _mm256_setzero_si256() : sum[r], w[u], x);
          } else {
            const __m256i p = _mm256_maddubs_epi16(w[u], x);
            sum[r] = first ? p : _mm256_add_epi16(sum[r], p);
          }
        }
      }
    }
    // With VNNI the piece's int32 sum (at most 16 * 7 * 127) is its low
    // int16 half: the scale less 32 in the low half of its lane, zero above,
    // and one vpmaddwd is the exact product (vpmulld: two uops).
    __m256i scale =
        _mm256_sub_epi16(LaneByte16(X8ScalesQ3_K(tile, piece / 4), piece % 4), _mm256_set1_epi16(32));
    if constexpr (D::kVnni) scale = _mm256_blend_epi16(scale, _mm256_setzero_si256(), 0xAA);
    for (int r = 0; r < R; ++r) out[r] = _mm256_add_epi32(out[r], _mm256_madd_epi16(sum[r], scale));
  }
  // Less 4 sum_i sc_i s_i, as X8SumsQ3_K.
  __m256i c[R];
  for (int r = 0; r < R; ++r) c[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int t = 0; t < 8; ++t) {
    const __m256i scales =
        _mm256_sub_epi16(LaneBytePair16(X8ScalesQ3_K(tile, t / 2), 2 * (t % 2)), _mm256_set1_epi16(32));
    for (int r = 0; r < R; ++r)
      c[r] = _mm256_add_epi32(c[r], _mm256_madd_epi16(scales, Dword(pieces[r] + 2 * t)));
  }
  for (int r = 0; r < R; ++r) out[r] = _mm256_sub_epi32(out[r], _mm256_slli_epi32(c[r], 2));
}

// R activation rows from m against a Q5_0, Q5_1 or Q4_1 group g, each
// nibble vector (and its fifth bits) unpacked once for every row:
// X8RowGroups' integers (X8SumsQ5_0's, X8SumsQ4_0's) and fma steps. With
// VNNI a vector's low and high nibbles go together, 2R vpdpbusd chains;
// without, one half at a time, its products added in int16 (four 5-bit
// vectors' pair sums at most 4 * 7874, so exact) and widened once: a
// row's three instructions a vector (vpmaddubsw, vpmaddwd, vpaddd) become
// two, and R rows' sums stay in AVX2's 16 registers.
template <class D, X8Format F, int R>
void X8TileNibbles(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                   int n_valid) {
  constexpr bool kFifth = F == X8Format::kQ5_0 || F == X8Format::kQ5_1;
  constexpr bool kHasMin = F == X8Format::kQ4_1 || F == X8Format::kQ5_1;
  static_assert(kFifth || F == X8Format::kQ4_1);
  constexpr int64_t kTileBytes = kFifth ? 320 : 256;
  constexpr int64_t kScaleStride = kHasMin ? 64 : 32;
  const int64_t blocks = a.k / kQK;
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    FetchGroupBlockAhead(g, kTileBytes, kScaleStride, b);
    const uint8_t* tile = g.quants + kTileBytes * b;
    const int8_t* q[R];
    for (int r = 0; r < R; ++r) q[r] = a.x->row_q(m + r) + kQK * b;
    // Vector j's low (half 0) or high nibbles, with their fifth bits.
    auto values = [&](int j, int half) {
      const __m256i v = Load256(tile + 64 * j);
      __m256i w = _mm256_and_si256(half == 0 ? v : _mm256_srli_epi16(v, 4), nibble);
      if constexpr (kFifth) w = _mm256_or_si256(w, X8FifthBits(Load256(tile + 256), 16 * half + 4 * j));
      return w;
    };
    __m256i sum[R];
    if constexpr (D::kVnni) {
      __m256i p[R][2];
      for (int r = 0; r < R; ++r) p[r][0] = p[r][1] = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {
        const __m256i low = values(j, 0), high = values(j, 1);
        for (int r = 0; r < R; ++r) {
          p[r][0] = DotAdd<D>(p[r][0], low, X8Dword(q[r], j));
          p[r][1] = DotAdd<D>(p[r][1], high, X8Dword(q[r], 4 + j));
        }
      }
      for (int r = 0; r < R; ++r) sum[r] = _mm256_add_epi32(p[r][0], p[r][1]);
    } else {
      const __m256i ones = _mm256_set1_epi16(1);
      for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
      for (int half = 0; half < 2; ++half) {
        __m256i run[R];
        for (int r = 0; r < R; ++r) run[r] = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
          const __m256i w = values(j, half);
          for (int r = 0; r < R; ++r)
            run[r] = _mm256_add_epi16(run[r], _mm256_maddubs_epi16(w, X8Dword(q[r], 4 * half + j)));
        }
        for (int r = 0; r < R; ++r) sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(run[r], ones));
      }
    }
    const uint8_t* scales = g.scales + kScaleStride * b;
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    for (int r = 0; r < R; ++r) {
      const int16_t* s = a.x->row_sums(m + r) + 2 * b;
      const int32_t q_sum = static_cast<int32_t>(s[0]) + s[1];
      if constexpr (F == X8Format::kQ5_0) sum[r] = _mm256_sub_epi32(sum[r], _mm256_set1_epi32(16 * q_sum));
      const __m256 dx = _mm256_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(sum[r]), acc[r]);
      if constexpr (kHasMin) {
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32)));
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dm, dx), _mm256_set1_ps(static_cast<float>(q_sum)), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(y + r * a.ldy, acc[r], bias, n_valid);
}

// R activation rows from m against IQ4_NL group g, each nibble vector
// looked up in the table (and its magnitudes taken) once for every row:
// X8SumsIQ4_NL's integers and X8RowGroups' fma. With VNNI the table is
// looked up biased by 128, an unsigned operand as it is, and 128 times the
// block's activation sum taken off: the same exact integers with one
// multiply-add per row and vector instead of a sign and a multiply-add
// (vpdpbusd sums in int32; vpmaddubsw's int16 pairs would saturate).
template <class D, int R>
void X8TileIQ4_NL(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                  int n_valid) {
  const int64_t blocks = a.k / kQK;
  const __m256i table = IQ4Table();
  const __m256i biased = _mm256_xor_si256(table, _mm256_set1_epi8(static_cast<char>(0x80)));
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    FetchGroupBlockAhead(g, 256, 32, b);
    const int8_t* q[R];
    __m256i p[R][2];
    for (int r = 0; r < R; ++r) {
      q[r] = a.x->row_q(m + r) + kQK * b;
      p[r][0] = p[r][1] = _mm256_setzero_si256();
    }
    X8ForEachQ4_0Vector(g.quants + 256 * b, [&](int j, __m256i low, __m256i high) {
      if constexpr (D::kVnni) {
        const __m256i wl = _mm256_shuffle_epi8(biased, low), wh = _mm256_shuffle_epi8(biased, high);
        for (int r = 0; r < R; ++r) {
          p[r][0] = DotAdd<D>(p[r][0], wl, X8Dword(q[r], j));
          p[r][1] = DotAdd<D>(p[r][1], wh, X8Dword(q[r], 4 + j));
        }
      } else {
        const __m256i wl = _mm256_shuffle_epi8(table, low);
        const __m256i wh = _mm256_shuffle_epi8(table, high);
        const __m256i magnitude_l = _mm256_abs_epi8(wl), magnitude_h = _mm256_abs_epi8(wh);
        for (int r = 0; r < R; ++r) {
          p[r][0] = DotAdd<D>(p[r][0], magnitude_l, _mm256_sign_epi8(X8Dword(q[r], j), wl));
          p[r][1] = DotAdd<D>(p[r][1], magnitude_h, _mm256_sign_epi8(X8Dword(q[r], 4 + j), wh));
        }
      }
    });
    const __m256 dw = X8Scales(g, b);
    for (int r = 0; r < R; ++r) {
      __m256i sum = _mm256_add_epi32(p[r][0], p[r][1]);
      if constexpr (D::kVnni) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(128 * BlockSum32(a, m + r, b)));
      const __m256 dx = _mm256_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(sum), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(y + r * a.ldy, acc[r], bias, n_valid);
}

// IQ4_XS's 8 rows against R activation rows, each index vector looked up
// (and its magnitudes taken) once for every row: row r's 256 values at
// q[r] and its A into out[r], X8SumsIQ4_XS's integers in its order.
template <class D, int R>
inline void X8SumsIQ4_XSRows(const uint8_t* tile, const int8_t* const q[R],
                             const int32_t* const block_sums[R], __m256i scales_h, __m256i out[R]) {
  if constexpr (!D::kVnni) {
    // Without VNNI each vector's pair sums are widened by vpmaddwd with the
    // sub-block's scale (in both int16 halves of a row's lane) instead of
    // ones, so a row needs no sub-block sum and no vpmulld: one
    // accumulator a row. |pair sum| <= 2 * 127 * 127 and |scale| <= 32, so
    // every step is exact and A is the same integer. (With a sum per row
    // and sub-block, 2-4 rows kept 270-545 vectors a super-block on the
    // stack.)
    const __m256i table = IQ4Table();
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < R; ++r) out[r] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const __m256i scale = X8ScaleIQ4_XS(Load256(tile), scales_h, s);
      const __m256i scale16 =
          _mm256_or_si256(_mm256_and_si256(scale, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(scale, 16));
      // Not unrolled: GCC then loaded all 32 of a sub-block's activation
      // dwords for 4 rows up front, and spilled them.
#pragma GCC unroll 1
      for (int j = 0; j < 4; ++j) {
        const __m256i v = Load256(tile + 64 * (1 + 4 * s + j));
        for (int half = 0; half < 2; ++half) {
          const __m256i index = _mm256_and_si256(half == 0 ? v : _mm256_srli_epi16(v, 4), nibble);
          const __m256i w = _mm256_shuffle_epi8(table, index);
          const __m256i magnitude = _mm256_abs_epi8(w);
          for (int r = 0; r < R; ++r) {
            const __m256i x = _mm256_sign_epi8(Dword(q[r] + 32 * s + 16 * half + 4 * j), w);
            out[r] = _mm256_add_epi32(out[r], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, x), scale16));
          }
        }
      }
    }
    return;
  }
  const __m256i table = IQ4Table();
  const __m256i biased = _mm256_xor_si256(table, _mm256_set1_epi8(static_cast<char>(0x80)));
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i scales_l = Load256(tile);
  for (int r = 0; r < R; ++r) out[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = Load256(tile + 64 * (1 + 4 * s + j));
      const __m256i low = _mm256_and_si256(v, nibble),
                    high = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
      if constexpr (D::kVnni) {
        const __m256i wl = _mm256_shuffle_epi8(biased, low), wh = _mm256_shuffle_epi8(biased, high);
        for (int r = 0; r < R; ++r) {
          sum[r] = DotAdd<D>(sum[r], wl, Dword(q[r] + 32 * s + 4 * j));
          sum[r] = DotAdd<D>(sum[r], wh, Dword(q[r] + 32 * s + 16 + 4 * j));
        }
      } else {
        const __m256i wl = _mm256_shuffle_epi8(table, low), wh = _mm256_shuffle_epi8(table, high);
        const __m256i magnitude_l = _mm256_abs_epi8(wl), magnitude_h = _mm256_abs_epi8(wh);
        for (int r = 0; r < R; ++r) {
          sum[r] = DotAdd<D>(sum[r], magnitude_l, _mm256_sign_epi8(Dword(q[r] + 32 * s + 4 * j), wl));
          sum[r] = DotAdd<D>(sum[r], magnitude_h, _mm256_sign_epi8(Dword(q[r] + 32 * s + 16 + 4 * j), wh));
        }
      }
    }
    if constexpr (D::kVnni) {
      // As X8TileIQ4_NL's: the bias of 128 taken off with the sub-block's sum.
      for (int r = 0; r < R; ++r)
        sum[r] = _mm256_sub_epi32(sum[r], _mm256_set1_epi32(128 * block_sums[r][s]));
    }
    const __m256i scale = X8ScaleIQ4_XS(scales_l, scales_h, s);
    for (int r = 0; r < R; ++r) out[r] = _mm256_add_epi32(out[r], _mm256_mullo_epi32(sum[r], scale));
  }
}

// R activation rows from m against IQ4_XS group g: per super-block,
// acc = fma(d dx, A, acc), as X8SuperRowGroups.
template <class D, int R>
void X8TileIQ4_XS(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                  int n_valid) {
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(DType::kIQ4_XS);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    FetchGroupBlockAhead(g, tile_bytes, 64, b);
    const int8_t* q[R];
    int32_t sub_sums[R][8];
    const int32_t* block_sums[R];
    for (int r = 0; r < R; ++r) {
      q[r] = a.x->row_q(m + r) + kQK_K * b;
      if constexpr (D::kVnni) {
        for (int s = 0; s < 8; ++s) sub_sums[r][s] = BlockSum32(a, m + r, 8 * b + s);
      }
      block_sums[r] = sub_sums[r];
    }
    // The scales area as X8SuperRowGroups reads it: d, then the high scale bits.
    const uint8_t* scales = g.scales + 64 * b;
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    const __m256i high =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32)));
    __m256i sum[R];
    X8SumsIQ4_XSRows<D, R>(g.quants + tile_bytes * b, q, block_sums, high, sum);
    for (int r = 0; r < R; ++r) {
      const __m256 dx = _mm256_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(y + r * a.ldy, acc[r], bias, n_valid);
}

// Q4_K's or Q5_K's 8 rows against R activation rows, each weight vector
// unpacked (nibbles masked, fifth bits merged) once for every row: row r's
// 256 values at q[r], and its A and B (X8SumsK45's) into a_out[r] and
// b_out[r]. A sub-block's products add up in the runs X8SumsK45 takes
// (int16 without VNNI, int32 with), one accumulator a row, then scaled
// into A: the same exact integers, so a row gets the bits it gets alone.
// Without VNNI the sub-blocks go one at a time (a vector's low or high
// nibbles), so that R rows' runs stay in AVX2's 16 registers with the
// vector, its nibbles and the masks. (896 x 4864, 5 rows from memory, 2
// threads: AVX2 324 -> 243 us, AVX-VNNI 310 -> 216; 512 rows in cache
// 1.5-1.7x faster.)
template <class D, bool kFifth, int R>
inline void X8SumsK45Rows(const uint8_t* tile, const int8_t* const q[R], const SuperRowSums* const sums[R],
                          __m256i a_out[R], __m256i b_out[R]) {
  const uint8_t* qh = tile + 64 * 3;
  const uint8_t* qs = tile + 64 * (kFifth ? 11 : 3);
  constexpr int kRun = D::kVnni ? 8 : (kFifth ? 4 : 8);
  // With VNNI a vpdpbusd chain waits on the last (5 cycles): a vector's
  // low and high nibbles go together, 2R chains. Without, the int16 adds
  // wait a cycle and one half at a time leaves registers to spare.
  constexpr int kHalves = D::kVnni ? 2 : 1;
  for (int r = 0; r < R; ++r) a_out[r] = _mm256_setzero_si256();
  // Sub-blocks 2c + h0 .. 2c + h0 + kHalves - 1 (nibbles `half` of
  // vectors 8c..8c+7), the run of vectors from j0.
  auto run = [&](int c, int h0, int j0, auto step_loop) {
    __m256i sum[kHalves][R];
    for (int hh = 0; hh < kHalves; ++hh)
      for (int r = 0; r < R; ++r) sum[hh][r] = _mm256_setzero_si256();
    step_loop([&](int j) {
      const __m256i v = Load256(qs + 64 * (8 * c + j));
#pragma GCC unroll 2
      for (int hh = 0; hh < kHalves; ++hh) {
        const int half = h0 + hh;
        __m256i w = _mm256_and_si256(half == 0 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
        if constexpr (kFifth) {
          // Bit 2c + half of each qh byte to bit 4, as X8SumsK45.
          const int shift = 2 * c + half;
          const __m256i h = Load256(qh + 64 * j);
          const __m256i moved = shift < 4 ? _mm256_slli_epi16(h, 4 - shift) : _mm256_srli_epi16(h, shift - 4);
          w = _mm256_or_si256(w, _mm256_and_si256(moved, _mm256_set1_epi8(0x10)));
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i x = Dword(q[r] + 64 * c + 32 * half + 4 * j);
          if constexpr (D::kVnni) {
            sum[hh][r] = DotAdd<D>(sum[hh][r], w, x);
          } else {
            sum[hh][r] = _mm256_add_epi16(sum[hh][r], _mm256_maddubs_epi16(w, x));
          }
        }
      }
    });
#pragma GCC unroll 2
    for (int hh = 0; hh < kHalves; ++hh) {
      // The sub-block's 6-bit scale (recomputed here, not held across the
      // runs: the registers are the runs').
      __m256i sc[2], mins[2];
      X8ScalesMinsK45(tile, sc, mins);
      const int k = 2 * (c % 2) + h0 + hh;
      const __m256i scale = D::kVnni ? LaneByte32(sc[c / 2], k) : LaneByte16(sc[c / 2], k);
      for (int r = 0; r < R; ++r) {
        a_out[r] = _mm256_add_epi32(a_out[r], D::kVnni ? _mm256_mullo_epi32(sum[hh][r], scale)
                                                       : _mm256_madd_epi16(sum[hh][r], scale));
      }
    }
  };
  auto sub_blocks = [&](int c) {
#pragma GCC unroll 2
    for (int h0 = 0; h0 < 2; h0 += kHalves) {
#pragma GCC unroll 2
      for (int j0 = 0; j0 < 8; j0 += kRun) {
        if constexpr (D::kVnni) {
          // Unrolled: GCC kept a loop's 2R chains in registers only so.
          run(c, h0, j0, [&](auto step) {
#pragma GCC unroll 8
            for (int j = j0; j < j0 + kRun; ++j) step(j);
          });
        } else {
          // A loop: unrolled, GCC computed a run's products first and
          // spilled them (5 rows 10-15% slower).
          run(c, h0, j0, [&](auto step) {
#pragma GCC unroll 1
            for (int j = j0; j < j0 + kRun; ++j) step(j);
          });
        }
      }
    }
  };
  if constexpr (kFifth) {
    // Unrolled, so that the fifth bits' shifts are constants.
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) sub_blocks(c);
  } else {
#pragma GCC unroll 1
    for (int c = 0; c < 4; ++c) sub_blocks(c);
  }
  // B as X8SumsK45.
  __m256i sc[2], mins[2];
  X8ScalesMinsK45(tile, sc, mins);
  for (int r = 0; r < R; ++r) b_out[r] = X8MinsTermK45(mins, *sums[r]);
}

// R activation rows from m against group g of a k-quant (Q2_K to Q6_K):
// per super-block, acc = fma(d dx, A, acc), then fma(dmin dx, B, acc) for
// Q2_K, Q4_K and Q5_K, as X8SuperRowGroups.
template <class D, DType T, int R>
void X8TileSuper(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                 int n_valid) {
  constexpr bool kHasMin = T == DType::kQ2_K || T == DType::kQ4_K || T == DType::kQ5_K;
  constexpr int64_t kScaleStride = kHasMin ? 64 : 32;
  const int64_t blocks = a.k / kQK_K;
  const int64_t tile_bytes = X8TileBytes(T);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    FetchGroupBlockAhead(g, tile_bytes, kScaleStride, b);
    const uint8_t* tile = g.quants + tile_bytes * b;
    const int8_t* q[R];
    const int16_t* pieces[R];
    for (int r = 0; r < R; ++r) {
      q[r] = a.x->row_q(m + r) + kQK_K * b;
      pieces[r] = a.x->row_sums(m + r) + 16 * b;
    }
    __m256i sum_a[R];
    [[maybe_unused]] __m256i sum_b[R];
    if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      SuperRowSums row_sums[R];
      const SuperRowSums* sums[R];
      for (int r = 0; r < R; ++r) {
        SetSubBlockSums(pieces[r], &row_sums[r]);
        sums[r] = &row_sums[r];
      }
      X8SumsK45Rows<D, T == DType::kQ5_K, R>(tile, q, sums, sum_a, sum_b);
    } else if constexpr (T == DType::kQ2_K) {
      X8SumsQ2_KRows<D, R>(tile, q, pieces, sum_a, sum_b);
    } else if constexpr (T == DType::kQ3_K) {
      X8SumsQ3_KRows<D, R>(tile, q, pieces, sum_a);
    } else {
      static_assert(T == DType::kQ6_K);
      X8SumsQ6_KRows<D, R>(tile, q, pieces, sum_a);
    }
    // The scales area as X8SuperRowGroups reads it: d, then dmin.
    const uint8_t* scales = g.scales + kScaleStride * b;
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    [[maybe_unused]] __m256 dm;
    if constexpr (kHasMin)
      dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32)));
    for (int r = 0; r < R; ++r) {
      const __m256 dx = _mm256_set1_ps(a.x->row_d(m + r)[b]);
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum_a[r]), acc[r]);
      if constexpr (kHasMin)
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dm, dx), _mm256_cvtepi32_ps(sum_b[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) StoreRow(y + r * a.ldy, acc[r], bias, n_valid);
}

// The shared-rows tile of type T for R rows.
template <class D, DType T, int R>
void X8SharedTile(const QuantGemmArgs& a, const X8Group& g, int64_t m, float* y, const float* bias,
                  int n_valid) {
  if constexpr (T == DType::kQ2_K || T == DType::kQ3_K || T == DType::kQ4_K || T == DType::kQ5_K ||
                T == DType::kQ6_K) {
    X8TileSuper<D, T, R>(a, g, m, y, bias, n_valid);
  } else if constexpr (T == DType::kQ5_0) {
    X8TileNibbles<D, X8Format::kQ5_0, R>(a, g, m, y, bias, n_valid);
  } else if constexpr (T == DType::kQ5_1) {
    X8TileNibbles<D, X8Format::kQ5_1, R>(a, g, m, y, bias, n_valid);
  } else if constexpr (T == DType::kQ4_1) {
    X8TileNibbles<D, X8Format::kQ4_1, R>(a, g, m, y, bias, n_valid);
  } else if constexpr (T == DType::kIQ4_NL) {
    X8TileIQ4_NL<D, R>(a, g, m, y, bias, n_valid);
  } else {
    static_assert(T == DType::kIQ4_XS);
    X8TileIQ4_XS<D, R>(a, g, m, y, bias, n_valid);
  }
}

// Many rows of any x8 type but Q8_0 and Q4_0: row blocks of kRowBlock; within
// each, every group of the range, read (from cache after the block's first
// tile) by tiles of kX8SharedRows rows (5 where five are left).
template <class D, DType T>
void X8SharedRows(const QuantGemmArgs& a) {
  constexpr int kRows = kX8SharedRows;
  using Tile = void (*)(const QuantGemmArgs&, const X8Group&, int64_t, float*, const float*, int);
  // Five rows left (a verification pass's k + 1) go as one tile, every
  // weight vector unpacked once: as 4 and 1, 5 rows of Q5_0 took 15-20%
  // longer (AVX2 and AVX-VNNI, 2 threads), IQ4_XS 12-13%, even though the
  // 5-row tile spills some of its sums.
  const Tile tiles[5] = {&X8SharedTile<D, T, 1>, &X8SharedTile<D, T, 2>, &X8SharedTile<D, T, 3>,
                         &X8SharedTile<D, T, 4>, &X8SharedTile<D, T, 5>};
  static_assert(kRows == 4);
  for (int64_t mb = a.m_begin; mb < a.m_end; mb += kRowBlock) {
    const int64_t me = mb + kRowBlock < a.m_end ? mb + kRowBlock : a.m_end;
    for (int64_t g = a.g_begin; g < a.g_end; ++g) {
      const int64_t n0 = g * kQuantGroupRows;
      const int n_valid = static_cast<int>(a.n_total - n0 < kQuantGroupRows ? a.n_total - n0 : kQuantGroupRows);
      const X8Group group = GroupOf(a, g);
      // Rows in one block read the group from memory in their first tile,
      // which fetches the next pair ahead, as one row does. Without, 5
      // rows waited on memory (AVX2, 2 threads: Q5_0's 151936 x 896 LM
      // head 15.5-16.0 -> 10.9 ms, its 4864 x 896 layer 422 -> 355-364 us;
      // Q6_K 896 x 4864 -5%), and 16 (a batch decoding: Q5_0's 4864 x 896
      // 886 -> 817-862 us, Q4_K's and Q6_K's 896 x 4864 -4% and -6%).
      const X8Group first =
          a.m_end - a.m_begin <= kRowBlock ? WithNextPairFetched(a, group, g, X8TileBytes(T)) : group;
      const float* bias = a.bias != nullptr ? a.bias + n0 : nullptr;
      for (int64_t m = mb; m < me;) {
        const int r = static_cast<int>(me - m == 5 ? 5 : (me - m < kRows ? me - m : kRows));
        tiles[r - 1](a, m == mb ? first : group, m, a.y + m * a.ldy + n0, bias, n_valid);
        m += r;
      }
    }
  }
}

template <class D>
void GemmAny(const QuantGemmArgs& a) {
  if (a.x8 != nullptr && a.w_type == DType::kQ8_0) return GemmX8<D, true>(a);
  if (a.x8 != nullptr && a.w_type == DType::kQ4_0) return GemmX8<D, false>(a);
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  // With 512-bit VNNI, Q5_0's, IQ4_NL's, Q4_1's and Q5_1's rows in the
  // few-row tiles on pairs of groups, as Q4_0's; Q4_K's, Q5_K's, Q6_K's and
  // IQ4_XS's in tiles of 4 rows on pairs of groups (Q4_K and Q5_K
  // ran row by row, unpacking every vector for every row; Q6_K and IQ4_XS 4
  // rows a group on 256 bits), and one row (decoding) too: one instruction
  // for 16 weight rows instead of 8 where unpacking is the work (decode of
  // a Q4_K model 71 -> 126 tok/s, IQ4_XS 67 -> 131, Q6_K 50 -> 83). Of the
  // 32-value formats only Q5_0 and Q5_1, whose fifth bits are most of the
  // unpacking, decode on pairs too (AMD Zen 5: Q5_0 74-89 -> 88-95 tok/s,
  // Q5_1 66-71 -> 78-81); Q4_0 and Q4_1 decoded slower there, IQ4_NL no
  // faster. Q2_K and Q3_K on pairs too (896 x 4864 from memory, 2 threads,
  // an Intel Xeon with AMX: 5 rows 154 -> 121 us and 179 -> 140 against
  // their 256-bit tiles; one row in cache 1.3x as fast, from memory level).
  if constexpr (std::is_same_v<D, DotVnni>) {
    if (a.x8 != nullptr && a.x->by_block != nullptr) {
      if (a.w_type == DType::kQ5_0) return X8RowBlocks<D, X8Format::kQ5_0>(a);
      if (a.w_type == DType::kQ5_1) return X8RowBlocks<D, X8Format::kQ5_1>(a);
      if (a.m_end - a.m_begin > 1) {
        if (a.w_type == DType::kIQ4_NL) return X8RowBlocks<D, X8Format::kIQ4_NL>(a);
        if (a.w_type == DType::kQ4_1) return X8RowBlocks<D, X8Format::kQ4_1>(a);
      }
    }
    if (a.x8 != nullptr) {
      if (a.w_type == DType::kQ4_K) return X8SuperPairRows<D, DType::kQ4_K>(a);
      if (a.w_type == DType::kQ5_K) return X8SuperPairRows<D, DType::kQ5_K>(a);
      if (a.w_type == DType::kQ6_K) return X8SuperPairRows<D, DType::kQ6_K>(a);
      if (a.w_type == DType::kIQ4_XS) return X8SuperPairRows<D, DType::kIQ4_XS>(a);
      if (a.w_type == DType::kQ3_K) return X8SuperPairRows<D, DType::kQ3_K>(a);
      if (a.w_type == DType::kQ2_K) return X8SuperPairRows<D, DType::kQ2_K>(a);
    }
  }
#endif
  if (a.x8 != nullptr && a.m_end - a.m_begin > 1 && X8ServesEveryRowCount(a.w_type)) {
    if (a.w_type == DType::kQ6_K) return X8SharedRows<D, DType::kQ6_K>(a);
    if (a.w_type == DType::kQ5_0) return X8SharedRows<D, DType::kQ5_0>(a);
    if (a.w_type == DType::kQ5_1) return X8SharedRows<D, DType::kQ5_1>(a);
    if (a.w_type == DType::kQ4_1) return X8SharedRows<D, DType::kQ4_1>(a);
    if (a.w_type == DType::kIQ4_NL) return X8SharedRows<D, DType::kIQ4_NL>(a);
    if (a.w_type == DType::kIQ4_XS) return X8SharedRows<D, DType::kIQ4_XS>(a);
    if (a.w_type == DType::kQ4_K) return X8SharedRows<D, DType::kQ4_K>(a);
    if (a.w_type == DType::kQ5_K) return X8SharedRows<D, DType::kQ5_K>(a);
    if (a.w_type == DType::kQ3_K) return X8SharedRows<D, DType::kQ3_K>(a);
    if (a.w_type == DType::kQ2_K) return X8SharedRows<D, DType::kQ2_K>(a);
  }
  if (a.x8 != nullptr && a.m_end - a.m_begin == 1) {
    switch (a.w_type) {
      case DType::kIQ4_NL: return X8Row<D, X8Format::kIQ4_NL>(a);
      case DType::kQ5_0: return X8Row<D, X8Format::kQ5_0>(a);
      case DType::kQ4_1: return X8Row<D, X8Format::kQ4_1>(a);
      case DType::kQ5_1: return X8Row<D, X8Format::kQ5_1>(a);
      case DType::kQ4_K: return X8SuperRow<D, DType::kQ4_K>(a);
      case DType::kQ5_K: return X8SuperRow<D, DType::kQ5_K>(a);
      case DType::kQ6_K: return X8SuperRow<D, DType::kQ6_K>(a);
      case DType::kQ3_K: return X8SuperRow<D, DType::kQ3_K>(a);
      case DType::kQ2_K: return X8SuperRow<D, DType::kQ2_K>(a);
      case DType::kIQ4_XS: return X8SuperRow<D, DType::kIQ4_XS>(a);
      default: break;
    }
  }
  switch (a.w_type) {
    case DType::kQ8_0: return Gemm<D, FormatQ8_0, false>(a);
    case DType::kQ4_0: return Gemm<D, FormatQ4_0, false>(a);
    case DType::kQ5_0: return Gemm<D, FormatQ5_0, false>(a);
    case DType::kQ4_1: return Gemm<D, FormatQ4_1, false>(a);
    case DType::kQ5_1: return Gemm<D, FormatQ5_1, false>(a);
    case DType::kQ2_K: return Gemm<D, FormatQ2_K, true>(a);
    case DType::kQ3_K: return Gemm<D, FormatQ3_K, true>(a);
    case DType::kQ4_K: return Gemm<D, FormatQ4_K, true>(a);
    case DType::kQ5_K: return Gemm<D, FormatQ5_K, true>(a);
    case DType::kQ6_K: return Gemm<D, FormatQ6_K, true>(a);
    case DType::kIQ4_NL: return Gemm<D, FormatIQ4_NL, false>(a);
    case DType::kIQ4_XS: return Gemm<D, FormatIQ4_XS, true>(a);
    case DType::kIQ2_XXS: return Gemm<D, FormatIQ2_XXS, true>(a);
    case DType::kIQ3_XXS: return Gemm<D, FormatIQ3_XXS, true>(a);
    case DType::kIQ2_XS: return Gemm<D, FormatIQ2_XS, true>(a);
    case DType::kIQ3_S: return Gemm<D, FormatIQ3_S, true>(a);
    case DType::kIQ2_S: return Gemm<D, FormatIQ2_S, true>(a);
    default: return;  // PackQuantMatrix admits no other type
  }
}

// ---- Activation quantization ----------------------------------------------

// As the reference: d = max|x| / 127 (0 below float's normal range or when
// infinite), q = round-half-even(x / d) within [-127, 127].
inline void BlockScale(float amax, float* d, float* inverse) {
  float scale = amax / 127.0f;
  if (!(scale >= std::numeric_limits<float>::min()) || scale > std::numeric_limits<float>::max()) scale = 0.0f;
  *d = scale;
  *inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
}

inline __m256 LoadFloats(const void* x, bool bf16, int64_t at) {
  if (bf16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(x) + at));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  return _mm256_loadu_ps(static_cast<const float*>(x) + at);
}

inline float MaxLane(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 values: 4 vectors of int32 rounded and clamped, packed to bytes in order.
inline __m256i RoundPack32(const __m256 v[4], __m256 inverse) {
  const __m256i hi = _mm256_set1_epi32(127), lo = _mm256_set1_epi32(-127);
  __m256i i[4];
  for (int u = 0; u < 4; ++u) {
    i[u] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[u], inverse)), hi), lo);
  }
  const __m256i p01 = _mm256_packs_epi32(i[0], i[1]);
  const __m256i p23 = _mm256_packs_epi32(i[2], i[3]);
  const __m256i bytes = _mm256_packs_epi16(p01, p23);
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

template <int kBlock>
void QuantizeRowsTyped(const QuantizeRowsArgs& a) {
  constexpr int kVectors = kBlock / 8;
  const int64_t k = a.out.k;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    int8_t* q = a.out.q + m * k;
    float* d = a.out.d + m * (k / kBlock);
    int16_t* sums = a.out.sums + m * (k / 16);
    for (int64_t b = a.b_begin; b < a.b_end; ++b) {
      __m256 v[kVectors];
      __m256 amax = _mm256_setzero_ps();
      for (int u = 0; u < kVectors; ++u) {
        v[u] = LoadFloats(a.x, a.bf16, m * a.ldx + b * kBlock + 8 * u);
        // |x| first: MAXPS returns its second operand where the first is
        // NaN, so a NaN counts as nothing, as in the reference.
        amax = _mm256_max_ps(_mm256_and_ps(v[u], abs_mask), amax);
      }
      float inverse;
      BlockScale(MaxLane(amax), &d[b], &inverse);
      const __m256 inv = _mm256_set1_ps(inverse);
      for (int u = 0; u < kVectors; u += 4) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kBlock + 8 * u), RoundPack32(v + u, inv));
      }
    }
    // Piece sums: 16 bytes widened and added (exact).
    for (int64_t i = a.b_begin * kBlock / 16; i < a.b_end * kBlock / 16; ++i) {
      const __m256i wide = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * i)));
      const __m256i pairs = _mm256_madd_epi16(wide, _mm256_set1_epi16(1));
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
      s = _mm_hadd_epi32(s, s);
      s = _mm_hadd_epi32(s, s);
      sums[i] = static_cast<int16_t>(_mm_cvtsi128_si32(s));
    }
  }
}

inline void QuantizeRows(const QuantizeRowsArgs& a) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
  QuantizeRowsAvx512(a);
#else
  if (a.out.block == kQK_K) {
    QuantizeRowsTyped<kQK_K>(a);
  } else {
    QuantizeRowsTyped<kQK>(a);
  }
#endif
}

}  // namespace qgemm
}  // namespace
}  // namespace kiln::cpu
