// ggml's quantized block layouts, byte for byte, as kiln structs: what one
// block of a GGUF tensor of each block type holds.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

// Elements per block of the simple formats and per super-block of the k-quants.
inline constexpr int kQK = 32;
inline constexpr int kQK_K = 256;
// Bytes of the packed 6-bit scales and mins of Q4_K/Q5_K (and Q3_K's scales).
inline constexpr int kKScaleBytes = 12;

// Halves are IEEE binary16 bit patterns (core/half.h converts them).
using HalfBits = uint16_t;

// 32 values: value = d * (q - 8), q a 4-bit nibble. Byte j holds element j in
// its low nibble and element j + 16 in its high nibble.
struct BlockQ4_0 {
  HalfBits d;
  uint8_t qs[kQK / 2];
};

// 32 values: value = d * q + m, q a 4-bit nibble (same packing as Q4_0).
struct BlockQ4_1 {
  HalfBits d;
  HalfBits m;
  uint8_t qs[kQK / 2];
};

// 32 values: value = d * (q - 16), q = 4 low bits from qs (packed as Q4_0)
// plus the 5th bit of element i at bit i of qh (a little-endian uint32).
struct BlockQ5_0 {
  HalfBits d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// 32 values: value = d * q + m, q packed as in Q5_0.
struct BlockQ5_1 {
  HalfBits d;
  HalfBits m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// 32 values: value = d * q.
struct BlockQ8_0 {
  HalfBits d;
  int8_t qs[kQK];
};

// 32 values: value = d * q; s = d * sum(q) is kept for dot products.
struct BlockQ8_1 {
  HalfBits d;
  HalfBits s;
  int8_t qs[kQK];
};

// 256 values in 16 sub-blocks of 16: value = d * sc * q - dmin * m, where
// scales[i] holds sub-block i's 4-bit sc (low nibble) and m (high nibble) and
// q is a 2-bit field of qs (see dequantize.cc for the exact bit positions).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  HalfBits d;
  HalfBits dmin;
};

// 256 values in 16 sub-blocks of 16: value = d * (sc - 32) * (q - 4 * !h),
// with 6-bit scales packed into 12 bytes, q a 2-bit field of qs and h one bit
// of hmask.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  HalfBits d;
};

// 256 values in 8 sub-blocks of 32: value = d * sc * q - dmin * m, with the
// 6-bit sc and m of each sub-block packed into 12 bytes, q a 4-bit nibble.
struct BlockQ4_K {
  HalfBits d;
  HalfBits dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};

// As Q4_K, with a 5th bit of q in qh.
struct BlockQ5_K {
  HalfBits d;
  HalfBits dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// 256 values in 16 sub-blocks of 16: value = d * scales[i] * (q - 32), q
// 6 bits: 4 from ql, 2 from qh.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  HalfBits d;
};

// 256 values: value = d * q; bsums (sums of 16 q each) serve dot products.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// The 16 values the 4-bit indices of IQ4_NL and IQ4_XS stand for (before
// the scale): spaced non-linearly, denser near zero, as weights are.
inline constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// 32 values: value = d * kIQ4Values[q], q a 4-bit index packed as Q4_0's
// nibbles (byte j: element j low, element j + 16 high).
struct BlockIQ4_NL {
  HalfBits d;
  uint8_t qs[kQK / 2];
};

// 256 values in 8 sub-blocks of 32: value = d * (ls - 32) * kIQ4Values[q],
// where sub-block j's 6-bit ls has its low 4 bits in nibble j % 2 of
// scales_l[j / 2] and its high 2 bits at bits 2j, 2j+1 of scales_h; sub-block
// j's indices are packed as an IQ4_NL block's in qs[16 j .. 16 j + 15].
struct BlockIQ4_XS {
  HalfBits d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

// ggml's 2- and 3-bit i-quants: 256 values in 8 sub-blocks of 32, each
// group of 8 (IQ2) or 4 (IQ3) magnitudes one index into a fixed grid
// (quant/iquant_grids.h), signs stored apart, and a 4-bit scale ls per
// sub-block (per 16 values for IQ2_XS and IQ2_S). Multi-byte fields are
// little-endian.

// value = d * (0.5 + ls) / 4 * grid * sign. Sub-block j is 8 bytes at
// qs[8 j]: 4 indices into kIQ2XXSGrid (one per 8 values), then a uint32
// whose bits 7 l .. 7 l + 6 are group l's signs (SignsFrom7Bits) and bits
// 28-31 ls.
struct BlockIQ2_XXS {
  HalfBits d;
  uint8_t qs[kQK_K / 4];
};

// value = d * (0.5 + ls) / 4 * grid * sign. Group g (0..31, 8 values) is a
// uint16 at qs[2 g]: a 9-bit index into kIQ2XSGrid and 7 sign bits above
// it. Sub-block j's groups 0-1 take the low nibble of scales[j], 2-3 the high.
struct BlockIQ2_XS {
  HalfBits d;
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kQK_K / 32];
};

// As IQ2_XS, with a 10-bit index into kIQ2SGrid: the low 8 bits in qs[g],
// the high 2 at bits 2 (g % 4), 2 (g % 4) + 1 of qh[g / 4]; and all 8 signs
// of group g in signs[g].
struct BlockIQ2_S {
  HalfBits d;
  uint8_t qs[kQK_K / 8];
  uint8_t signs[kQK_K / 8];
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};

// value = d * (0.5 + ls) / 2 * grid * sign. Group h (0..63, 4 values) is
// the index qs[h] into kIQ3XXSGrid; sub-block j's signs and ls are the
// uint32 at scales_signs[4 j], as IQ2_XXS's (7 sign bits per 8 values).
struct BlockIQ3_XXS {
  HalfBits d;
  uint8_t qs[kQK_K / 4];
  uint8_t scales_signs[kQK_K / 32 * 4];
};

// value = d * (1 + 2 ls) * grid * sign. Group h (0..63, 4 values) has a
// 9-bit index into kIQ3SGrid: qs[h] and bit h % 8 of qh[h / 8]. signs[g]
// holds the 8 signs of values 8 g .. 8 g + 7; sub-block j's ls is nibble
// j % 2 of scales[j / 2].
struct BlockIQ3_S {
  HalfBits d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ3_S) == 110);

// Writes `block` as block `index` of a row of blocks starting at `dst`
// (byte-wise: a row's blocks need not be aligned for their struct).
template <typename Block>
void StoreBlock(void* dst, int64_t index, const Block& block) {
  std::memcpy(static_cast<uint8_t*>(dst) + index * static_cast<int64_t>(sizeof(Block)), &block, sizeof(Block));
}

}  // namespace kiln
