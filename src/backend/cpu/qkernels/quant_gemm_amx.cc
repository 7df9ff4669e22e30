// The AMX quantized GEMM (quant_gemm_amx.h). Compiled with AMX and AVX-512;
// only called where AmxQuantGemmRuns says so.
//
// A cell is done strip by strip: 16 output columns, one pair of x8 row
// groups, whose Q8_0 block tiles are B tiles as they are stored (the
// nibble formats' are unpacked into signed bytes in scratch first); every
// row tile of 16 activation rows passes over them, its 16 x 16
// accumulators in registers. Per block one tdpbssd gives the exact int32
// sums, which the fp32 epilogue scales and adds. The tile unit works on
// blocks b + 1 to b + 3 while the vector units scale block b.

#include "backend/cpu/qkernels/quant_gemm_amx.h"

// GCC 12's AVX-512 intrinsic headers build some vectors from deliberately
// undefined ones and then warn about them (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/amx.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "backend/cpu/qkernels/x8_fifth_bits_avx512.h"
#include "quant/ggml_blocks.h"

namespace kiln::cpu {
namespace {

constexpr int kBlock = 32;                 // values per block
constexpr int kStripCols = kX8PairRows;    // 16 output columns: one C tile
constexpr int kTileRows = 16;              // activation rows per A tile
constexpr int64_t kBTileBytes = 512;       // 8 rows (4 values each) x 16 columns

// Scratch: a nibble format's or k-quant's strip's unpacked B tiles, four
// blocks' stored sums, a zero-padded copy of a cell's last, partial row
// tile, and for Q4_K and Q5_K the strip's sub-block scales, its mins in
// pairs, and a row tile's fp32 sums.
struct Scratch {
  uint8_t* b_tiles;     // [blocks][8][64]
  int32_t* sums;        // [4][16][16]
  int8_t* tail_q;       // [16][k]
  int32_t* sub_scales;  // [sub-blocks][16]: sub-block b's scale per column
  int32_t* min_pairs;   // [super-blocks][4 or 8][16]: mins 2i, 2i+1 as int16 pairs
  float* acc;           // [16][16]
};

// Where each part of the scratch starts, in bytes, for `blocks` blocks of
// 32 values, and its size.
struct ScratchLayout {
  int64_t b_tiles, sums, tail_q, sub_scales, min_pairs, acc, bytes;
};

ScratchLayout LayOut(int64_t blocks) {
  ScratchLayout l;
  l.b_tiles = 0;
  l.sums = l.b_tiles + blocks * kBTileBytes;
  l.tail_q = l.sums + 4 * 16 * 16 * 4;
  l.sub_scales = l.tail_q + (kTileRows * blocks * kBlock + 63) / 64 * 64;
  l.min_pairs = l.sub_scales + 2 * blocks * 16 * 4;  // Q6_K: k / 16 sub-blocks
  l.acc = l.min_pairs + (blocks + 7) / 8 * 8 * 16 * 4;  // Q2_K: 8 pairs
  l.bytes = l.acc + 16 * 16 * 4;
  return l;
}

Scratch Carve(void* base, int64_t blocks) {
  auto* p = static_cast<uint8_t*>(base);
  const ScratchLayout l = LayOut(blocks);
  Scratch s;
  s.b_tiles = p + l.b_tiles;
  s.sums = reinterpret_cast<int32_t*>(p + l.sums);
  s.tail_q = reinterpret_cast<int8_t*>(p + l.tail_q);
  s.sub_scales = reinterpret_cast<int32_t*>(p + l.sub_scales);
  s.min_pairs = reinterpret_cast<int32_t*>(p + l.min_pairs);
  s.acc = reinterpret_cast<float*>(p + l.acc);
  return s;
}

// Block j is multiplied in C tile j % 4 (16 x 16 int32, tiles 0-3), from A
// tile 4 + j % 2 (16 rows of the block's `values` bytes: 32, or Q6_K's
// 16) and B tile 6 + j % 2 (values / 4 rows of 16 columns x 4 bytes).
void Configure(int values = kBlock) {
  AmxTileConfig c;
  for (int t = 0; t < 4; ++t) {
    c.rows[t] = kTileRows;
    c.colsb[t] = 64;
  }
  for (int t = 4; t < 6; ++t) {
    c.rows[t] = kTileRows;
    c.colsb[t] = static_cast<uint16_t>(values);
    c.rows[2 + t] = static_cast<uint8_t>(values / 4);
    c.colsb[2 + t] = 64;
  }
  _tile_loadconfig(&c);
}

// A Q4_K or Q5_K pair's super-blocks (tiles `tile_bytes` apart) as B
// tiles in scratch, one per sub-block of 32: line 8c + j of the nibbles
// holds values 64c + 4j..4j+3 (low nibbles, sub-block 2c) and 64c + 32 +
// 4j..4j+3 (high, sub-block 2c + 1) of the 16 rows, with Q5_K's fifth bits
// (bits 2c and 2c + 1 of its line j) added as 16: unsigned 0-31, signed
// bytes as they are. Each sub-block's 6-bit scale goes to sub_scales and
// the mins, in int16 pairs (2i, 2i + 1), to min_pairs, one int32 lane per
// row (UnpackScaleMinK4's fields, read as X8SumsK45 does).
template <bool kFifth>
void UnpackK45Tiles(const uint8_t* tiles, int64_t super_blocks, int64_t tile_bytes, uint8_t* dst,
                    int32_t* sub_scales, int32_t* min_pairs) {
  const __m512i six = _mm512_set1_epi8(0x3F), four = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  const __m512i byte = _mm512_set1_epi32(0xFF), sixteen = _mm512_set1_epi8(0x10);
  for (int64_t sb = 0; sb < super_blocks; ++sb) {
    const uint8_t* tile = tiles + tile_bytes * sb;
    const __m512i a0 = _mm512_loadu_si512(tile), a1 = _mm512_loadu_si512(tile + 64),
                  a2 = _mm512_loadu_si512(tile + 128);
    const __m512i sc[2] = {
        _mm512_and_si512(a0, six),
        _mm512_or_si512(_mm512_and_si512(a2, four), _mm512_and_si512(_mm512_srli_epi32(a0, 2), top))};
    const __m512i mins[2] = {_mm512_and_si512(a1, six),
                             _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), four),
                                             _mm512_and_si512(_mm512_srli_epi32(a1, 2), top))};
    for (int j = 0; j < 8; ++j) {
      const __m512i v = _mm512_and_si512(_mm512_srlv_epi32(sc[j / 4], _mm512_set1_epi32(8 * (j % 4))), byte);
      _mm512_storeu_si512(sub_scales + 16 * (8 * sb + j), v);
    }
    for (int i = 0; i < 4; ++i) {
      const __m512i v = mins[i / 2];
      const __m512i low = _mm512_and_si512(_mm512_srlv_epi32(v, _mm512_set1_epi32(16 * (i % 2))), byte);
      const __m512i high = _mm512_and_si512(_mm512_srlv_epi32(v, _mm512_set1_epi32(16 * (i % 2) + 8)), byte);
      _mm512_storeu_si512(min_pairs + 16 * (4 * sb + i), _mm512_or_si512(low, _mm512_slli_epi32(high, 16)));
    }
    const uint8_t* qh = tile + 64 * 3;
    const uint8_t* qs = tile + 64 * (kFifth ? 11 : 3);
    for (int c = 0; c < 4; ++c) {
      for (int j = 0; j < 8; ++j) {
        const __m512i v = _mm512_loadu_si512(qs + 64 * (8 * c + j));
        __m512i low = _mm512_and_si512(v, four);
        __m512i high = _mm512_and_si512(_mm512_srli_epi16(v, 4), four);
        if constexpr (kFifth) {
          // Bits 2c and 2c + 1 of each byte to bit 4 (16-bit shifts: the
          // bits crossing bytes are masked off).
          const __m512i h = _mm512_loadu_si512(qh + 64 * j);
          const __m512i h0 = c < 2 ? _mm512_sllv_epi16(h, _mm512_set1_epi16(static_cast<short>(4 - 2 * c)))
                                   : _mm512_srlv_epi16(h, _mm512_set1_epi16(static_cast<short>(2 * c - 4)));
          const __m512i h1 = c < 2 ? _mm512_sllv_epi16(h, _mm512_set1_epi16(static_cast<short>(3 - 2 * c)))
                                   : _mm512_srlv_epi16(h, _mm512_set1_epi16(static_cast<short>(2 * c - 3)));
          low = _mm512_or_si512(low, _mm512_and_si512(h0, sixteen));
          high = _mm512_or_si512(high, _mm512_and_si512(h1, sixteen));
        }
        _mm512_storeu_si512(dst + kBTileBytes * (8 * sb + 2 * c) + 64 * j, low);
        _mm512_storeu_si512(dst + kBTileBytes * (8 * sb + 2 * c + 1) + 64 * j, high);
      }
    }
  }
}

// A Q6_K pair's super-blocks as B tiles in scratch, one per sub-block of
// 16 (4 rows of 64 bytes, 256 bytes): line 3(8h + j) + t (t < 3) holds
// value 128h + 32t + 4j + p (sub-block 8h + 2t + j / 4, B row j % 4) in
// bits 0-5 of byte p and two bits of value 128h + 96 + 4j + p (sub-block
// 8h + 6 + j / 4) in bits 6-7; each value less 32 is a signed byte whose
// products sum to the reference's sum w q - 32 s_i exactly. The 16 int8
// scales (lines 48-51) go to sub_scales, sign-extended.
void UnpackQ6_KTiles(const uint8_t* tiles, int64_t super_blocks, int64_t tile_bytes, uint8_t* dst,
                     int32_t* sub_scales) {
  constexpr int64_t kSubTileBytes = 256;
  const __m512i six = _mm512_set1_epi8(0x3F), two = _mm512_set1_epi8(0x03), thirty_two = _mm512_set1_epi8(32);
  for (int64_t sb = 0; sb < super_blocks; ++sb) {
    const uint8_t* tile = tiles + tile_bytes * sb;
    for (int l = 0; l < 4; ++l) {
      const __m512i v = _mm512_loadu_si512(tile + 64 * (48 + l));
      for (int p = 0; p < 4; ++p) {
        const __m512i sc = _mm512_srai_epi32(_mm512_sllv_epi32(v, _mm512_set1_epi32(24 - 8 * p)), 24);
        _mm512_storeu_si512(sub_scales + 16 * (16 * sb + 4 * l + p), sc);
      }
    }
    uint8_t* out = dst + kSubTileBytes * 16 * sb;
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 8; ++j) {
        __m512i top = _mm512_setzero_si512();
        for (int t = 0; t < 3; ++t) {
          const __m512i line = _mm512_loadu_si512(tile + 64 * (3 * (8 * h + j) + t));
          _mm512_storeu_si512(out + kSubTileBytes * (8 * h + 2 * t + j / 4) + 64 * (j % 4),
                              _mm512_sub_epi8(_mm512_and_si512(line, six), thirty_two));
          const __m512i bits = _mm512_and_si512(_mm512_srli_epi16(line, 6), two);
          top = _mm512_or_si512(top, _mm512_sllv_epi16(bits, _mm512_set1_epi16(static_cast<short>(2 * t))));
        }
        _mm512_storeu_si512(out + kSubTileBytes * (8 * h + 6 + j / 4) + 64 * (j % 4),
                            _mm512_sub_epi8(top, thirty_two));
      }
    }
  }
}

// A Q3_K pair's super-blocks as B tiles in scratch, one per sub-block of
// 16 (as Q6_K's): for h < 2 and i < 4, line 3(4h + i) + t (t < 3) holds in
// byte p values v(t, 2i) (bits 0-2) and v(t, 2i + 1) (bits 3-5), v(g, j)
// being value 128h + 32g + 4j + p, of sub-block 8h + 2g + j / 4 and B row
// j % 4; v(3, 2i) and v(3, 2i + 1) are put together from the three lines'
// bits 6-7 (quant_matrix.h). Each 3-bit value less 4 is a signed byte
// whose products sum to the reference's sum w' q - 4 s_i exactly. The
// 6-bit scales less 32 (UnpackScaleQ3_K's fields of the 12 bytes on lines
// 24-26) go to sub_scales.
void UnpackQ3_KTiles(const uint8_t* tiles, int64_t super_blocks, int64_t tile_bytes, uint8_t* dst,
                     int32_t* sub_scales) {
  constexpr int64_t kSubTileBytes = 256;
  const __m512i seven = _mm512_set1_epi8(7), one = _mm512_set1_epi8(1), three = _mm512_set1_epi8(3),
                four = _mm512_set1_epi8(4);
  for (int64_t sb = 0; sb < super_blocks; ++sb) {
    const uint8_t* tile = tiles + tile_bytes * sb;
    const __m512i packed[3] = {_mm512_loadu_si512(tile + 64 * 24), _mm512_loadu_si512(tile + 64 * 25),
                               _mm512_loadu_si512(tile + 64 * 26)};
    for (int i = 0; i < 16; ++i) {
      const int byte = i < 8 ? i : i - 8;
      const __m512i low = _mm512_and_si512(
          _mm512_srlv_epi32(packed[byte / 4], _mm512_set1_epi32(8 * (byte % 4) + (i < 8 ? 0 : 4))),
          _mm512_set1_epi32(0x0F));
      const __m512i high = _mm512_and_si512(
          _mm512_srlv_epi32(packed[2], _mm512_set1_epi32(8 * (i % 4) + 2 * (i / 4))), _mm512_set1_epi32(3));
      _mm512_storeu_si512(
          sub_scales + 16 * (16 * sb + i),
          _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32)));
    }
    uint8_t* out = dst + kSubTileBytes * 16 * sb;
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 4; ++i) {
        __m512i line[3];
        for (int t = 0; t < 3; ++t) {
          line[t] = _mm512_loadu_si512(tile + 64 * (3 * (4 * h + i) + t));
          uint8_t* sub = out + kSubTileBytes * (8 * h + 2 * t + i / 2) + 64 * (2 * (i % 2));
          _mm512_storeu_si512(sub, _mm512_sub_epi8(_mm512_and_si512(line[t], seven), four));
          _mm512_storeu_si512(sub + 64,
                              _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(line[t], 3), seven), four));
        }
        // Bits 6-7 of each byte, as bits 0-1 (16-bit shifts: the bits
        // crossing bytes are masked off).
        const __m512i top0 = _mm512_and_si512(_mm512_srli_epi16(line[0], 6), three);
        const __m512i top1 = _mm512_srli_epi16(line[1], 6);
        const __m512i top2 = _mm512_and_si512(_mm512_srli_epi16(line[2], 6), three);
        const __m512i even = _mm512_or_si512(top0, _mm512_slli_epi16(_mm512_and_si512(top1, one), 2));
        const __m512i odd =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(top1, 1), one), _mm512_slli_epi16(top2, 1));
        uint8_t* sub = out + kSubTileBytes * (8 * h + 6 + i / 2) + 64 * (2 * (i % 2));
        _mm512_storeu_si512(sub, _mm512_sub_epi8(even, four));
        _mm512_storeu_si512(sub + 64, _mm512_sub_epi8(odd, four));
      }
    }
  }
}

// A Q2_K pair's super-blocks as B tiles in scratch, one per piece of 16
// (as Q6_K's): line 4 + l holds value bytes 4l..4l+3, whose bits 2s,
// 2s + 1 are value 128(l / 8) + 32s + 4(l % 8) + p, of piece 8(l / 8) + 2s
// + (l % 8) / 4 and B row l % 4 (unsigned 0-3). Lines 0-3 hold the 16
// scale bytes: the low nibbles go to sub_scales, the high ones (mins), in
// int16 pairs, to min_pairs ([8][16] a super-block).
void UnpackQ2_KTiles(const uint8_t* tiles, int64_t super_blocks, int64_t tile_bytes, uint8_t* dst,
                     int32_t* sub_scales, int32_t* min_pairs) {
  constexpr int64_t kSubTileBytes = 256;
  const __m512i three = _mm512_set1_epi8(3), low4 = _mm512_set1_epi32(0x0F);
  for (int64_t sb = 0; sb < super_blocks; ++sb) {
    const uint8_t* tile = tiles + tile_bytes * sb;
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(tile + 64 * k);
      for (int p = 0; p < 4; ++p) {
        _mm512_storeu_si512(sub_scales + 16 * (16 * sb + 4 * k + p),
                            _mm512_and_si512(_mm512_srlv_epi32(v, _mm512_set1_epi32(8 * p)), low4));
      }
      for (int half = 0; half < 2; ++half) {
        const __m512i even = _mm512_and_si512(_mm512_srlv_epi32(v, _mm512_set1_epi32(16 * half + 4)), low4);
        const __m512i odd = _mm512_and_si512(_mm512_srlv_epi32(v, _mm512_set1_epi32(16 * half + 12)), low4);
        _mm512_storeu_si512(min_pairs + 16 * (8 * sb + 2 * k + half),
                            _mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
      }
    }
    uint8_t* out = dst + kSubTileBytes * 16 * sb;
    for (int l = 0; l < 16; ++l) {
      const __m512i v = _mm512_loadu_si512(tile + 64 * (4 + l));
      for (int sh = 0; sh < 4; ++sh) {
        const __m512i w =
            _mm512_and_si512(_mm512_srlv_epi16(v, _mm512_set1_epi16(static_cast<short>(2 * sh))), three);
        _mm512_storeu_si512(out + kSubTileBytes * (8 * (l / 8) + 2 * sh + (l % 8) / 4) + 64 * (l % 4), w);
      }
    }
  }
}

// An IQ4_XS pair's super-blocks as B tiles in scratch, one per sub-block
// of 32: line 1 + l holds index bytes 4l..4l+3 of the 16 rows, that is
// sub-block l / 4's values 4(l % 4)..+3 (low nibbles, B row l % 4) and
// 16 + 4(l % 4)..+3 (high, B row 4 + l % 4), looked up in the signed
// table. Sub-block j's scale ls_j - 32 (low nibble j of line 0's 4 bytes,
// high bits 2j, 2j + 1 of scales_h, the 16 rows' uint16 after their d in
// the scales area `scales`) goes to sub_scales.
void UnpackIQ4_XSTiles(const uint8_t* tiles, const uint8_t* scales, int64_t super_blocks, int64_t tile_bytes,
                       uint8_t* dst, int32_t* sub_scales) {
  const __m512i nibble = _mm512_set1_epi8(0x0F), low4 = _mm512_set1_epi32(0x0F), two = _mm512_set1_epi32(3),
                thirty_two = _mm512_set1_epi32(32);
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
  for (int64_t sb = 0; sb < super_blocks; ++sb) {
    const uint8_t* tile = tiles + tile_bytes * sb;
    const __m512i low_scales = _mm512_loadu_si512(tile);
    const __m512i high_scales =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 64 * sb + 32)));
    for (int j = 0; j < 8; ++j) {
      const __m512i low = _mm512_and_si512(_mm512_srlv_epi32(low_scales, _mm512_set1_epi32(4 * j)), low4);
      const __m512i high = _mm512_and_si512(_mm512_srlv_epi32(high_scales, _mm512_set1_epi32(2 * j)), two);
      _mm512_storeu_si512(sub_scales + 16 * (8 * sb + j),
                          _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), thirty_two));
    }
    for (int l = 0; l < 32; ++l) {
      const __m512i v = _mm512_loadu_si512(tile + 64 * (1 + l));
      const __m512i low = _mm512_shuffle_epi8(table, _mm512_and_si512(v, nibble));
      const __m512i high = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
      uint8_t* out = dst + kBTileBytes * (8 * sb + l / 4);
      _mm512_storeu_si512(out + 64 * (l % 4), low);
      _mm512_storeu_si512(out + 64 * (4 + l % 4), high);
    }
  }
}

// A strip: its block b's B tile at tiles + kBTileBytes * b, and 16 f16
// scales d at scales + scale_stride * b, followed by 16 f16 m for the
// formats with a min (Q4_1, Q5_1).
struct Strip {
  const uint8_t* tiles;
  const uint8_t* scales;
  int64_t scale_stride;
};

// A nibble format's pair of tiles as B tiles in scratch: line j of a tile
// holds values 4j..4j+3 (low nibbles) and 16+4j..16+4j+3 (high) of the 16
// rows, which become B rows j and 4 + j, as signed bytes whose dot product
// with the activations is the reference's A exactly: Q4_0's nibbles less
// 8 (A = sum w q - 8 (s0 + s1)), Q5_0's 5-bit values (the tile's fifth
// line adds each value's fifth bit) less 16, IQ4_NL's table values, Q4_1's
// and Q5_1's unsigned values as they are (0-31 are signed bytes too).
template <DType T>
void UnpackNibbleTiles(const uint8_t* tiles, int64_t blocks, uint8_t* dst) {
  constexpr bool kFifth = T == DType::kQ5_0 || T == DType::kQ5_1;
  constexpr int64_t kTileBytes = kFifth ? 320 : 256;
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i offset = _mm512_set1_epi8(T == DType::kQ4_0 ? 8 : (T == DType::kQ5_0 ? 16 : 0));
  const __m512i sixteen = _mm512_set1_epi8(16);
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = tiles + kTileBytes * b;
    [[maybe_unused]] __m512i qh;
    if constexpr (kFifth) qh = _mm512_loadu_si512(tile + 256);
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(tile + 64 * j);
      __m512i low = _mm512_and_si512(v, mask);
      __m512i high = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
      if constexpr (kFifth) {
        low = _mm512_mask_add_epi8(low, X8FifthBitMask(qh, 4 * j), low, sixteen);
        high = _mm512_mask_add_epi8(high, X8FifthBitMask(qh, 16 + 4 * j), high, sixteen);
      }
      if constexpr (T == DType::kIQ4_NL) {
        low = _mm512_shuffle_epi8(table, low);
        high = _mm512_shuffle_epi8(table, high);
      } else {
        low = _mm512_sub_epi8(low, offset);
        high = _mm512_sub_epi8(high, offset);
      }
      _mm512_storeu_si512(dst + kBTileBytes * b + 64 * j, low);
      _mm512_storeu_si512(dst + kBTileBytes * b + 64 * (4 + j), high);
    }
  }
}

void UnpackNibbleTiles(DType type, const uint8_t* tiles, int64_t blocks, uint8_t* dst) {
  switch (type) {
    case DType::kQ4_0: return UnpackNibbleTiles<DType::kQ4_0>(tiles, blocks, dst);
    case DType::kQ5_0: return UnpackNibbleTiles<DType::kQ5_0>(tiles, blocks, dst);
    case DType::kIQ4_NL: return UnpackNibbleTiles<DType::kIQ4_NL>(tiles, blocks, dst);
    case DType::kQ4_1: return UnpackNibbleTiles<DType::kQ4_1>(tiles, blocks, dst);
    case DType::kQ5_1: return UnpackNibbleTiles<DType::kQ5_1>(tiles, blocks, dst);
    default: return;
  }
}

// acc[r] = fma(d_w * dx[r], float(block sums of row r), acc[r]) for block b,
// then with a min acc[r] = fma(m_w * dx[r], s[r], acc[r]) (s: the row's
// activation sum in the block): the reference's steps for 16 rows x 16
// columns at once.
template <bool kHasMin>
__attribute__((always_inline)) inline void ScaleBlock(__m512 acc[kTileRows], const int32_t* sums,
                                                      const Strip& strip, const float* dx_tile,
                                                      const float* s_tile, int64_t b) {
  const uint8_t* scales = strip.scales + strip.scale_stride * b;
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  [[maybe_unused]] __m512 mw;
  if constexpr (kHasMin)
    mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 32)));
  const float* dx = dx_tile + b * kTileRows;
  [[maybe_unused]] const float* sx = kHasMin ? s_tile + b * kTileRows : nullptr;
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    const __m512 x_scale = _mm512_set1_ps(dx[r]);
    const __m512 d = _mm512_mul_ps(dw, x_scale);
    acc[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_loadu_si512(sums + 16 * r)), acc[r]);
    if constexpr (kHasMin)
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(mw, x_scale), _mm512_set1_ps(sx[r]), acc[r]);
  }
}

// The tile instructions name their registers in the instruction itself, so
// the pipeline below is written out per register: block j is multiplied
// with C tile j % 4, A tile 4 + j % 2 and B tile 6 + j % 2 (the row tile
// defines kABytes and kBBytes, a block's activation and B tile bytes).
#define KILN_AMX_MULTIPLY(c, a, b, block)              \
  do {                                                 \
    _tile_zero(c);                                     \
    _tile_loadd(a, q + (block)*kABytes, stride);       \
    _tile_loadd(b, strip.tiles + (block)*kBBytes, 64); \
    _tile_dpbssd(c, a, b);                             \
  } while (0)

// Step j of the pipeline: block j + 3 starts multiplying, block j's sums
// (stored one step earlier) are scaled (KILN_AMX_EPILOGUE, defined by
// each row tile), then block j + 1's are stored, two
// steps after its multiply started (one step measured 3-4% slower on an
// Intel Xeon's tiles: the store waited for the multiply). Placed after the
// scaling, the store holds up nothing behind it.
#define KILN_AMX_STEP(j, c_next, a_next, b_next, c_store)                                          \
  if ((j) < blocks) {                                                                              \
    if ((j) + 3 < blocks) KILN_AMX_MULTIPLY(c_next, a_next, b_next, (j) + 3);                      \
    for (int line = 0; line < prefetch_lines && prefetch < prefetch_end; ++line, prefetch += 64) { \
      _mm_prefetch(reinterpret_cast<const char*>(prefetch), _MM_HINT_T1);                          \
    }                                                                                              \
    KILN_AMX_EPILOGUE(j);                                                                          \
    if ((j) + 1 < blocks) _tile_stored(c_store, s.sums + 256 * (((j) + 1) % 4), 64);               \
  }

// Every block of a row tile in order: the first three multiplies, the
// first store, then the steps, four to a turn (a step past the last block
// does nothing).
#define KILN_AMX_PIPELINE()                        \
  do {                                             \
    KILN_AMX_MULTIPLY(0, 4, 6, 0);                 \
    if (blocks > 1) KILN_AMX_MULTIPLY(1, 5, 7, 1); \
    if (blocks > 2) KILN_AMX_MULTIPLY(2, 4, 6, 2); \
    _tile_stored(0, s.sums, 64);                   \
    for (int64_t b = 0; b < blocks; b += 4) {      \
      KILN_AMX_STEP(b, 3, 5, 7, 1)                 \
      KILN_AMX_STEP(b + 1, 0, 4, 6, 2)             \
      KILN_AMX_STEP(b + 2, 1, 5, 7, 3)             \
      KILN_AMX_STEP(b + 3, 2, 4, 6, 0)             \
    }                                              \
  } while (0)

// What a row tile writes: `rows` rows at y (ldy apart), the columns of
// `mask`, plus bias when `add_bias`.
struct TileOutput {
  float* y;
  int64_t ldy;
  int rows;
  __mmask16 mask;
  bool add_bias;
  __m512 bias;
};

// One row tile: 16 rows of int8 activations at q (rows `stride` bytes
// apart), their block scales at dx and (with a min) block sums at sx
// ([blocks][16] each), against the strip, every block in order; the
// accumulators stay in registers. Meanwhile the bytes [prefetch,
// prefetch_end) (the next strip's weights) are fetched into L2, spread over
// the blocks.
#define KILN_AMX_EPILOGUE(j) ScaleBlock<kHasMin>(acc, s.sums + 256 * ((j) % 4), strip, dx, sx, j)
template <bool kHasMin>
void RowTile(const int8_t* q, long stride, const float* dx, const float* sx, int64_t blocks,
             const Strip& strip, const Scratch& s, const uint8_t* prefetch, const uint8_t* prefetch_end,
             const TileOutput& out) {
  constexpr int64_t kABytes = kBlock, kBBytes = kBTileBytes;
  const int64_t prefetch_lines = ((prefetch_end - prefetch) / 64 + blocks - 1) / blocks;
  __m512 acc[kTileRows];
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) acc[r] = _mm512_setzero_ps();
  KILN_AMX_PIPELINE();
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    if (r >= out.rows) break;
    _mm512_mask_storeu_ps(out.y + r * out.ldy, out.mask,
                          out.add_bias ? _mm512_add_ps(acc[r], out.bias) : acc[r]);
  }
}

#undef KILN_AMX_EPILOGUE

// A super-block format's sub-block b: a[r] += its integer scale times the sums of
// row r, per column (exact: |A| < 2^31).
__attribute__((always_inline)) inline void ScaleSubBlock(__m512i a[kTileRows], const int32_t* sums,
                                                         const int32_t* sub_scale) {
  const __m512i sc = _mm512_loadu_si512(sub_scale);
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    a[r] = _mm512_add_epi32(a[r], _mm512_mullo_epi32(_mm512_loadu_si512(sums + 16 * r), sc));
  }
}

// The end of a super-block for 16 rows: the reference's acc = fma(d * dx,
// A, acc), and with kMinPairs pairs of mins (Q4_K and Q5_K: 4 of 32-value
// sub-blocks; Q2_K: 8 of 16-value pieces) B = -sum_j m_j s_j, from the
// columns' mins in int16 pairs at min_pairs ([kMinPairs][16]) and row r's
// activation sums in int16 pairs (x_pair(r, i)), then acc = fma(dmin * dx,
// B, acc); acc kept in scratch (the 16 registers hold A), and A back to
// zero.
template <int kMinPairs, class XPair>
__attribute__((always_inline)) inline void FinishSuperBlock(__m512i a[kTileRows], float* acc,
                                                            const uint8_t* scales, const float* dx,
                                                            XPair x_pair, const int32_t* min_pairs) {
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  [[maybe_unused]] __m512 dmin;
  if constexpr (kMinPairs > 0) {
    dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 32)));
  }
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    const __m512 x_scale = _mm512_set1_ps(dx[r]);
    __m512 sum = _mm512_loadu_ps(acc + 16 * r);
    sum = _mm512_fmadd_ps(_mm512_mul_ps(d, x_scale), _mm512_cvtepi32_ps(a[r]), sum);
    if constexpr (kMinPairs > 0) {
      __m512i b = _mm512_setzero_si512();
      for (int i = 0; i < kMinPairs; ++i) {
        b = _mm512_add_epi32(
            b, _mm512_madd_epi16(_mm512_loadu_si512(min_pairs + 16 * i), _mm512_set1_epi32(x_pair(r, i))));
      }
      const __m512 b_float = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), b));
      sum = _mm512_fmadd_ps(_mm512_mul_ps(dmin, x_scale), b_float, sum);
    }
    _mm512_storeu_ps(acc + 16 * r, sum);
    a[r] = _mm512_setzero_si512();
  }
}

// What differs between the super-block formats on the tiles: values per sub-block,
// sub-blocks per super-block, and whether a min term follows.
template <DType T>
struct SuperBlockShape {
  static constexpr int kValues = T == DType::kQ6_K || T == DType::kQ3_K || T == DType::kQ2_K ? 16 : 32;
  static constexpr int kSubBlocks = 256 / kValues;
  static constexpr int kMinPairs = T == DType::kQ4_K || T == DType::kQ5_K ? 4 : (T == DType::kQ2_K ? 8 : 0);
};

// RowTile for the super-block formats: blocks are the sub-blocks, whose sums are
// scaled as integers, every kSubBlocks-th closing a super-block; dx and
// x_pairs are the row tile's super-block scales ([super-blocks][16]) and
// sub-block sum pairs ([super-blocks][4][16]).
#define KILN_AMX_EPILOGUE(j)                                                                         \
  do {                                                                                               \
    ScaleSubBlock(a_int, s.sums + 256 * ((j) % 4), s.sub_scales + 16 * (j));                         \
    if ((j) % Shape::kSubBlocks == Shape::kSubBlocks - 1) {                                          \
      const int64_t sb = (j) / Shape::kSubBlocks;                                                    \
      FinishSuperBlock<Shape::kMinPairs>(                                                            \
          a_int, s.acc, strip.scales + strip.scale_stride * sb, dx + kTileRows * sb,                 \
          [&](int r, int i) { return x_pair(r, i, sb); }, s.min_pairs + Shape::kMinPairs * 16 * sb); \
    }                                                                                                \
  } while (0)
template <DType T>
void RowTileSuper(const int8_t* q, long stride, const float* dx, const int32_t* x_pairs,
                  const int16_t* row_pieces, int64_t pieces_stride, int64_t blocks, const Strip& strip,
                  const Scratch& s, const uint8_t* prefetch, const uint8_t* prefetch_end,
                  const TileOutput& out) {
  using Shape = SuperBlockShape<T>;
  // Row r's activation sums of super-block sb in int16 pairs: Q2_K's 16-value
  // pieces 2i, 2i + 1 as stored (rows past the tile's zero), the others'
  // 32-value sub-blocks from x_pairs.
  auto x_pair = [&](int r, int i, int64_t sb) -> int32_t {
    if constexpr (T == DType::kQ2_K) {
      if (r >= out.rows) return 0;
      int32_t pair;
      std::memcpy(&pair, row_pieces + r * pieces_stride + 16 * sb + 2 * i, 4);
      return pair;
    } else {
      return x_pairs[(4 * sb + i) * kTileRows + r];
    }
  };
  constexpr int64_t kABytes = Shape::kValues, kBBytes = 16 * Shape::kValues;
  const int64_t prefetch_lines = ((prefetch_end - prefetch) / 64 + blocks - 1) / blocks;
  __m512i a_int[kTileRows];
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    a_int[r] = _mm512_setzero_si512();
    _mm512_storeu_ps(s.acc + 16 * r, _mm512_setzero_ps());
  }
  KILN_AMX_PIPELINE();
  for (int r = 0; r < kTileRows; ++r) {
    if (r >= out.rows) break;
    const __m512 sum = _mm512_loadu_ps(s.acc + 16 * r);
    _mm512_mask_storeu_ps(out.y + r * out.ldy, out.mask, out.add_bias ? _mm512_add_ps(sum, out.bias) : sum);
  }
}
#undef KILN_AMX_EPILOGUE

#undef KILN_AMX_PIPELINE
#undef KILN_AMX_STEP
#undef KILN_AMX_MULTIPLY

}  // namespace

void AmxTileScales(const QuantizedRows& x, int64_t rows, int64_t begin, int64_t end, int64_t b_begin,
                   int64_t b_end) {
  const int64_t blocks = x.k / x.block;
  const int64_t stop = end < rows ? end : (rows + kTileRows - 1) / kTileRows * kTileRows;
  for (int64_t m = begin; m < stop; ++m) {
    const int64_t tile = m / kTileRows, row = m % kTileRows;
    const bool real = m < rows;
    for (int64_t b = b_begin; b < b_end; ++b) {
      const int64_t at = (tile * blocks + b) * kTileRows + row;
      x.tile_d[at] = real ? x.row_d(m)[b] : 0.0f;
      if (x.block == kBlock) {
        x.tile_s[at] =
            real ? static_cast<float>(static_cast<int32_t>(x.row_sums(m)[2 * b]) + x.row_sums(m)[2 * b + 1])
                 : 0.0f;
        continue;
      }
      // A super-block's eight sub-block sums (two 16-value pieces each),
      // two to an int32 as int16 (|sum| <= 4064).
      const int16_t* pieces = real ? x.row_sums(m) + 16 * b : nullptr;
      for (int i = 0; i < 4; ++i) {
        uint32_t pair = 0;
        if (real) {
          const auto low = static_cast<uint16_t>(pieces[4 * i] + pieces[4 * i + 1]);
          const auto high = static_cast<uint16_t>(pieces[4 * i + 2] + pieces[4 * i + 3]);
          pair = low | static_cast<uint32_t>(high) << 16;
        }
        x.tile_pairs[(tile * blocks + b) * 4 * kTileRows + i * kTileRows + row] = static_cast<int32_t>(pair);
      }
    }
  }
}

int64_t AmxQuantGemmScratchBytes(int64_t k) { return LayOut(k / kBlock).bytes; }

namespace {

// A cell's rows [m_begin, m_end) in row tiles of 16 from m_begin: rows
// before full_end in whole tiles, the last tail_rows (if any) copied into
// the scratch's zero-padded tile.
struct RowTiles {
  int64_t full_end;
  int tail_rows;
};

RowTiles PadLastRowTile(const QuantGemmArgs& a, const Scratch& s) {
  RowTiles t;
  t.full_end = a.m_begin + (a.m_end - a.m_begin) / kTileRows * kTileRows;
  t.tail_rows = static_cast<int>(a.m_end - t.full_end);
  if (t.tail_rows > 0) {
    std::memset(s.tail_q, 0, static_cast<size_t>(kTileRows * a.k));
    std::memcpy(s.tail_q, a.x->row_q(t.full_end), static_cast<size_t>(t.tail_rows * a.k));
  }
  return t;
}

// Fetches the lines of `rows` output rows (ldy apart, `cols` floats each)
// for writing. A row tile's output stores that miss the cache wait for
// their lines in the store queue, and the tile stores behind them (which
// leave in order) wait too, and with them every load of the sums: fetched
// one row tile ahead, the lines are there when the stores come (the stall
// halved a 512-row Q8_0 layer's speed on one thread).
void FetchForWriting(const float* y, int64_t ldy, int64_t rows, int cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const char* first = reinterpret_cast<const char*>(y + r * ldy);
    const char* last = reinterpret_cast<const char*>(y + r * ldy + cols - 1);
    __builtin_prefetch(first, 1, 3);
    if ((reinterpret_cast<uintptr_t>(first) ^ reinterpret_cast<uintptr_t>(last)) >= 64)
      __builtin_prefetch(last, 1, 3);
  }
}

// For the strip of pair g (its columns, bias and output), every row tile
// in order: body(q, m, out, prefetch, prefetch_end) with the tile's
// activations q (rows a.k bytes apart), first row m, output, and the
// next pair's bytes to fetch meanwhile (the first row tile's share).
template <class Body>
void ForEachRowTile(const QuantGemmArgs& a, const Scratch& s, const RowTiles& tiles, int64_t g, Body body) {
  const int64_t n0 = g * kQuantGroupRows;
  const int cols = static_cast<int>(std::min<int64_t>(a.n_total, n0 + kStripCols) - n0);
  TileOutput out;
  out.ldy = a.ldy;
  out.mask = static_cast<__mmask16>((1u << cols) - 1);
  out.add_bias = a.bias != nullptr;
  out.bias = out.add_bias ? _mm512_maskz_loadu_ps(out.mask, a.bias + n0) : _mm512_setzero_ps();
  const uint8_t* pair = a.x8 + g / 2 * a.x8_pair_bytes;
  const uint8_t* prefetch = pair + a.x8_pair_bytes;
  const uint8_t* prefetch_end = g + 2 < a.g_end ? prefetch + a.x8_pair_bytes : prefetch;
  for (int64_t m = a.m_begin; m < a.m_end; m += kTileRows) {
    out.y = a.y + m * a.ldy + n0;
    out.rows = m >= tiles.full_end ? tiles.tail_rows : kTileRows;
    const int64_t next = m + kTileRows;
    if (next < a.m_end)
      FetchForWriting(a.y + next * a.ldy + n0, a.ldy, std::min<int64_t>(a.m_end - next, kTileRows), cols);
    const int8_t* q = m >= tiles.full_end ? s.tail_q : a.x->row_q(m);
    body(q, m, out, prefetch, prefetch_end);
    prefetch = prefetch_end;
  }
}

// AmxQuantGemm for the super-block formats (the k-quants and IQ4_XS).
template <DType T>
void AmxSuperGemm(const QuantGemmArgs& a, void* scratch) {
  using Shape = SuperBlockShape<T>;
  const int64_t blocks = a.k / Shape::kValues, super_blocks = a.k / 256;
  const Scratch s = Carve(scratch, a.k / kBlock);
  const auto stride = static_cast<long>(a.k);
  const RowTiles tiles = PadLastRowTile(a, s);
  Configure(Shape::kValues);
  const int64_t scale_bytes = X8ScaleBytes(T, super_blocks);
  const int64_t tile_bytes = X8TileBytes(T);
  for (int64_t g = a.g_begin; g < a.g_end; g += 2) {
    const uint8_t* pair = a.x8 + g / 2 * a.x8_pair_bytes;
    if constexpr (T == DType::kQ6_K) {
      UnpackQ6_KTiles(pair + scale_bytes, super_blocks, tile_bytes, s.b_tiles, s.sub_scales);
    } else if constexpr (T == DType::kQ2_K) {
      UnpackQ2_KTiles(pair + scale_bytes, super_blocks, tile_bytes, s.b_tiles, s.sub_scales, s.min_pairs);
    } else if constexpr (T == DType::kQ3_K) {
      UnpackQ3_KTiles(pair + scale_bytes, super_blocks, tile_bytes, s.b_tiles, s.sub_scales);
    } else if constexpr (T == DType::kIQ4_XS) {
      UnpackIQ4_XSTiles(pair + scale_bytes, pair, super_blocks, tile_bytes, s.b_tiles, s.sub_scales);
    } else {
      UnpackK45Tiles<T == DType::kQ5_K>(pair + scale_bytes, super_blocks, tile_bytes, s.b_tiles, s.sub_scales,
                                        s.min_pairs);
    }
    const Strip strip{s.b_tiles, pair, X8ScaleStride(T)};
    ForEachRowTile(a, s, tiles, g,
                   [&](const int8_t* q, int64_t m, const TileOutput& out, const uint8_t* prefetch,
                       const uint8_t* prefetch_end) {
                     const int64_t tile = m / kTileRows;
                     RowTileSuper<T>(q, stride, a.x->tile_d + tile * super_blocks * kTileRows,
                                     a.x->tile_pairs + tile * super_blocks * 4 * kTileRows, a.x->row_sums(m),
                                     a.k / 16, blocks, strip, s, prefetch, prefetch_end, out);
                   });
  }
  _tile_release();
}

}  // namespace

void AmxQuantGemm(const QuantGemmArgs& a, void* scratch) {
  switch (a.w_type) {
    case DType::kQ4_K: return AmxSuperGemm<DType::kQ4_K>(a, scratch);
    case DType::kQ5_K: return AmxSuperGemm<DType::kQ5_K>(a, scratch);
    case DType::kQ6_K: return AmxSuperGemm<DType::kQ6_K>(a, scratch);
    case DType::kIQ4_XS: return AmxSuperGemm<DType::kIQ4_XS>(a, scratch);
    case DType::kQ3_K: return AmxSuperGemm<DType::kQ3_K>(a, scratch);
    case DType::kQ2_K: return AmxSuperGemm<DType::kQ2_K>(a, scratch);
    default: break;
  }
  const int64_t blocks = a.k / kBlock;
  const Scratch s = Carve(scratch, blocks);
  const auto stride = static_cast<long>(a.k);
  // A partial last row tile runs from a copy padded with zero rows.
  const RowTiles tiles = PadLastRowTile(a, s);
  Configure();
  const bool q8 = a.w_type == DType::kQ8_0;
  const bool has_min = a.w_type == DType::kQ4_1 || a.w_type == DType::kQ5_1;
  const int64_t scale_bytes = X8ScaleBytes(a.w_type, blocks);
  for (int64_t g = a.g_begin; g < a.g_end; g += 2) {
    const uint8_t* pair = a.x8 + g / 2 * a.x8_pair_bytes;
    Strip strip{pair + scale_bytes, pair, X8ScaleStride(a.w_type)};
    if (!q8) {
      UnpackNibbleTiles(a.w_type, strip.tiles, blocks, s.b_tiles);
      strip.tiles = s.b_tiles;
    }
    ForEachRowTile(a, s, tiles, g,
                   [&](const int8_t* q, int64_t m, const TileOutput& out, const uint8_t* prefetch,
                       const uint8_t* prefetch_end) {
                     const int64_t at = m / kTileRows * blocks * kTileRows;
                     if (has_min) {
                       RowTile<true>(q, stride, a.x->tile_d + at, a.x->tile_s + at, blocks, strip, s,
                                     prefetch, prefetch_end, out);
                     } else {
                       RowTile<false>(q, stride, a.x->tile_d + at, nullptr, blocks, strip, s, prefetch,
                                      prefetch_end, out);
                     }
                   });
  }
  // Hands the tile state back, so that switching this thread out saves no
  // 8 KiB of tile registers.
  _tile_release();
}

}  // namespace kiln::cpu
