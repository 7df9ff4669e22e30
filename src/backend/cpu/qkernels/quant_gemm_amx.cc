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
#include "quant/ggml_blocks.h"

namespace kiln::cpu {
namespace {

constexpr int kBlock = 32;                 // values per block
constexpr int kStripCols = kX8PairRows;    // 16 output columns: one C tile
constexpr int kTileRows = 16;              // activation rows per A tile
constexpr int64_t kBTileBytes = 512;       // 8 rows (4 values each) x 16 columns

// Scratch: a nibble format's strip's unpacked B tiles, four blocks' stored sums, and a
// zero-padded copy of a cell's last, partial row tile.
struct Scratch {
  uint8_t* b_tiles;  // [blocks][8][64]
  int32_t* sums;     // [4][16][16]
  int8_t* tail_q;    // [16][k]
};

// Where each part of the scratch starts, in bytes, for `blocks` blocks, and
// its size.
struct ScratchLayout {
  int64_t b_tiles, sums, tail_q, bytes;
};

ScratchLayout LayOut(int64_t blocks) {
  ScratchLayout l;
  l.b_tiles = 0;
  l.sums = l.b_tiles + blocks * kBTileBytes;
  l.tail_q = l.sums + 4 * 16 * 16 * 4;
  l.bytes = l.tail_q + kTileRows * blocks * kBlock;
  return l;
}

Scratch Carve(void* base, int64_t blocks) {
  auto* p = static_cast<uint8_t*>(base);
  const ScratchLayout l = LayOut(blocks);
  Scratch s;
  s.b_tiles = p + l.b_tiles;
  s.sums = reinterpret_cast<int32_t*>(p + l.sums);
  s.tail_q = reinterpret_cast<int8_t*>(p + l.tail_q);
  return s;
}

// Block j is multiplied in C tile j % 4 (16 x 16 int32, tiles 0-3), from A
// tile 4 + j % 2 (16 rows of the block's 32 bytes) and B tile 6 + j % 2 (8
// rows of 16 columns x 4 bytes).
void Configure() {
  AmxTileConfig c;
  for (int t = 0; t < 4; ++t) {
    c.rows[t] = kTileRows;
    c.colsb[t] = 64;
  }
  for (int t = 4; t < 6; ++t) {
    c.rows[t] = kTileRows;
    c.colsb[t] = kBlock;
    c.rows[2 + t] = kBlock / 4;
    c.colsb[2 + t] = 64;
  }
  _tile_loadconfig(&c);
}

// A strip: its block b's B tile at tiles + kBTileBytes * b, and 16 f16
// scales d at scales + scale_stride * b, followed by 16 f16 m for the
// formats with a min (Q4_1, Q5_1).
struct Strip {
  const uint8_t* tiles;
  const uint8_t* scales;
  int64_t scale_stride;
};

// In each 32-bit lane of qh (a row's 32 fifth bits), bits shift..shift+3
// as a mask of the lane's bytes 0..3.
inline __mmask64 FifthBitMask(__m512i qh, int shift) {
  const __m512i spread =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
  const __m512i low_byte = _mm512_shuffle_epi8(_mm512_srli_epi32(qh, shift), spread);
  return _mm512_test_epi8_mask(low_byte, _mm512_set1_epi32(0x08040201));
}

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
        low = _mm512_mask_add_epi8(low, FifthBitMask(qh, 4 * j), low, sixteen);
        high = _mm512_mask_add_epi8(high, FifthBitMask(qh, 16 + 4 * j), high, sixteen);
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
// with C tile j % 4, A tile 4 + j % 2 and B tile 6 + j % 2.
#define KILN_AMX_MULTIPLY(c, a, b, block)                \
  do {                                                   \
    _tile_zero(c);                                       \
    _tile_loadd(a, q + (block)*kBlock, stride);          \
    _tile_loadd(b, strip.tiles + (block)*kBTileBytes, 64); \
    _tile_dpbssd(c, a, b);                               \
  } while (0)

// Step j of the pipeline: block j + 3 starts multiplying, block j's sums
// (stored one step earlier) are scaled, then block j + 1's are stored, two
// steps after its multiply started (one step measured 3-4% slower on an
// Intel Xeon's tiles: the store waited for the multiply). Placed after the
// scaling, the store holds up nothing behind it.
#define KILN_AMX_STEP(j, c_next, a_next, b_next, c_store)                                          \
  if ((j) < blocks) {                                                                              \
    if ((j) + 3 < blocks) KILN_AMX_MULTIPLY(c_next, a_next, b_next, (j) + 3);                      \
    for (int line = 0; line < prefetch_lines && prefetch < prefetch_end; ++line, prefetch += 64) { \
      _mm_prefetch(reinterpret_cast<const char*>(prefetch), _MM_HINT_T1);                          \
    }                                                                                              \
    ScaleBlock<kHasMin>(acc, s.sums + 256 * ((j) % 4), strip, dx, sx, j);                          \
    if ((j) + 1 < blocks) _tile_stored(c_store, s.sums + 256 * (((j) + 1) % 4), 64);               \
  }

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
template <bool kHasMin>
void RowTile(const int8_t* q, long stride, const float* dx, const float* sx, int64_t blocks,
             const Strip& strip, const Scratch& s, const uint8_t* prefetch, const uint8_t* prefetch_end,
             const TileOutput& out) {
  const int64_t prefetch_lines = ((prefetch_end - prefetch) / 64 + blocks - 1) / blocks;
  __m512 acc[kTileRows];
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) acc[r] = _mm512_setzero_ps();
  KILN_AMX_MULTIPLY(0, 4, 6, 0);
  if (blocks > 1) KILN_AMX_MULTIPLY(1, 5, 7, 1);
  if (blocks > 2) KILN_AMX_MULTIPLY(2, 4, 6, 2);
  _tile_stored(0, s.sums, 64);
  for (int64_t b = 0; b < blocks; b += 4) {
    KILN_AMX_STEP(b, 3, 5, 7, 1)
    KILN_AMX_STEP(b + 1, 0, 4, 6, 2)
    KILN_AMX_STEP(b + 2, 1, 5, 7, 3)
    KILN_AMX_STEP(b + 3, 2, 4, 6, 0)
  }
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    if (r >= out.rows) break;
    _mm512_mask_storeu_ps(out.y + r * out.ldy, out.mask,
                          out.add_bias ? _mm512_add_ps(acc[r], out.bias) : acc[r]);
  }
}

#undef KILN_AMX_STEP
#undef KILN_AMX_MULTIPLY

}  // namespace

void AmxTileScales(const QuantizedRows& x, int64_t rows, int64_t begin, int64_t end) {
  const int64_t blocks = x.k / kBlock;
  const int64_t stop = end < rows ? end : (rows + kTileRows - 1) / kTileRows * kTileRows;
  for (int64_t m = begin; m < stop; ++m) {
    const int64_t at = (m / kTileRows) * blocks * kTileRows + m % kTileRows;
    float* d = x.tile_d + at;
    float* sums = x.tile_s + at;
    for (int64_t b = 0; b < blocks; ++b) {
      d[b * kTileRows] = m < rows ? x.row_d(m)[b] : 0.0f;
      sums[b * kTileRows] =
          m < rows ? static_cast<float>(static_cast<int32_t>(x.row_sums(m)[2 * b]) + x.row_sums(m)[2 * b + 1])
                   : 0.0f;
    }
  }
}

int64_t AmxQuantGemmScratchBytes(int64_t k) { return LayOut(k / kBlock).bytes; }

void AmxQuantGemm(const QuantGemmArgs& a, void* scratch) {
  const int64_t blocks = a.k / kBlock;
  const Scratch s = Carve(scratch, blocks);
  const auto stride = static_cast<long>(a.k);
  // A partial last row tile runs from a copy padded with zero rows.
  const int64_t full_end = a.m_begin + (a.m_end - a.m_begin) / kTileRows * kTileRows;
  const int tail_rows = static_cast<int>(a.m_end - full_end);
  if (tail_rows > 0) {
    std::memset(s.tail_q, 0, static_cast<size_t>(kTileRows * a.k));
    std::memcpy(s.tail_q, a.x->row_q(full_end), static_cast<size_t>(tail_rows * a.k));
  }
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
    const int64_t n0 = g * kQuantGroupRows;
    const int cols = static_cast<int>(std::min<int64_t>(a.n_total, n0 + kStripCols) - n0);
    TileOutput out;
    out.ldy = a.ldy;
    out.mask = static_cast<__mmask16>((1u << cols) - 1);
    out.add_bias = a.bias != nullptr;
    out.bias = out.add_bias ? _mm512_maskz_loadu_ps(out.mask, a.bias + n0) : _mm512_setzero_ps();
    // The next pair's bytes, fetched while the first row tile computes.
    const uint8_t* prefetch = pair + a.x8_pair_bytes;
    const uint8_t* prefetch_end = g + 2 < a.g_end ? prefetch + a.x8_pair_bytes : prefetch;
    for (int64_t m = a.m_begin; m < a.m_end; m += kTileRows) {
      out.y = a.y + m * a.ldy + n0;
      out.rows = m >= full_end ? tail_rows : kTileRows;
      const int8_t* q = m >= full_end ? s.tail_q : a.x->row_q(m);
      const int64_t at = m / kTileRows * blocks * kTileRows;
      if (has_min) {
        RowTile<true>(q, stride, a.x->tile_d + at, a.x->tile_s + at, blocks, strip, s, prefetch, prefetch_end,
                      out);
      } else {
        RowTile<false>(q, stride, a.x->tile_d + at, nullptr, blocks, strip, s, prefetch, prefetch_end, out);
      }
      prefetch = prefetch_end;
    }
  }
  // Hands the tile state back, so that switching this thread out saves no
  // 8 KiB of tile registers.
  _tile_release();
}

}  // namespace kiln::cpu
