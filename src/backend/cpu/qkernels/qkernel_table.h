// The per-ISA entry points of the quantized kernels (block-quantized weights
// times int8-quantized activations, and the int8 KV cache), chosen at run
// time like the float kernels' KernelTable. Each entry computes one piece on
// the calling thread; quant_linear.h and the KV kernels split the work.
//
// Included by the ISA-specific translation units: plain data only.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/kernels/kernel_table.h"
#include "core/dtype.h"

namespace kiln::cpu {

// Weight rows are computed in groups of this many output rows: one output
// vector of 8 lanes per activation row (see quant_gemm_simd.h).
inline constexpr int kQuantGroupRows = 8;

// Activations quantized for the integer dot products. Row m holds k int8
// values at q + m * k, one scale per block of `block` values (32 or 256) at
// d + m * (k / block), and the sum of every 16 consecutive int8 values at
// sums + m * (k / 16). Value i of a row stands for d[i / block] * q[i].
// Not owning.
//
// Where rows of 32-value blocks are quantized for the vector kernels
// (decoding, verifying drafted tokens, small batches, prefill), they also
// come block by block, the rows of a tile of by_block_rows rows side by side in
// each block, for the kernels that apply each weight block to several rows:
// with H = by_block_rows, T = m / H and blocks = k / 32, row m's block b is
// at index (T * blocks + b) * H + m % H: its values at by_block + 32 index,
// its scale at by_block_d[index], and its sum of values negated (what the
// formats' offsets subtract) at by_block_neg_sum[index]. H is the row count
// when it is under kByBlockTileRows, else kByBlockTileRows (the last tile
// padded), so that a tile's blocks are one contiguous run: a stride of all
// the rows would put a prefill's blocks of one row 4 KiB multiples apart,
// into the same few L1 sets. A single row is in that order already: its
// by_block and by_block_d are q and d. Null otherwise.
//
// Where the AMX kernel will take them (many rows of 32-value blocks on a CPU
// with AMX-INT8), the scales also come by row tile of 16, side by side for
// its epilogue's broadcasts: row m's block b at tile_d + ((m / 16) * blocks
// + b) * 16 + m % 16, rows past the last zero; for 32-value blocks, at the
// same index of tile_s the block's sum of values as a float (s_2b +
// s_2b+1, for the formats with a min); for 256-value blocks, at
// tile_pairs + ((m / 16) * blocks + b) * 64 + 16 i + m % 16 the sums of
// its sub-blocks 2i and 2i + 1 of 32 values as int16 in one int32 (low,
// high). Null otherwise.
constexpr int64_t kByBlockTileRows = 16;

struct QuantizedRows {
  int8_t* q = nullptr;
  float* d = nullptr;
  int16_t* sums = nullptr;
  int64_t k = 0;
  int block = 32;
  float* tile_d = nullptr;
  float* tile_s = nullptr;
  int32_t* tile_pairs = nullptr;
  int64_t rows = 0;
  int8_t* by_block = nullptr;
  float* by_block_d = nullptr;
  int32_t* by_block_neg_sum = nullptr;
  int64_t by_block_rows = 0;

  const int8_t* row_q(int64_t m) const { return q + m * k; }
  const float* row_d(int64_t m) const { return d + m * (k / block); }
  const int16_t* row_sums(int64_t m) const { return sums + m * (k / 16); }
};

// Quantizes blocks [b_begin, b_end) (of out.block values) of rows [m_begin,
// m_end) of x (fp32, or bfloat16 when `bf16`), row m at x + m * ldx
// elements, into `out`: per block, d = max|x| / 127 and q =
// round-half-even(x * (1 / d)) clamped to [-127, 127] (q = 0 when d = 0),
// and the blocks' 16-value piece sums.
struct QuantizeRowsArgs {
  const void* x;
  bool bf16;
  int64_t ldx;
  int64_t m_begin, m_end;
  int64_t b_begin, b_end;
  QuantizedRows out;
};

// y[m, n] = sum over blocks of W row n times activation row m (+ bias[n]),
// for m in [m_begin, m_end) and n in row groups [g_begin, g_end) of
// kQuantGroupRows (n < n_total). W row n is k / block_size(w_type) blocks of
// the GGUF layout at w + n * row_bytes. The exact arithmetic per format is
// written out in quant_reference.cc. Where `x8` is set, it holds the same
// blocks in the x8 layout (quant_matrix.h), x8_pair_bytes per pair of groups:
// the vector kernels read that instead of w; the reference reads w.
struct QuantGemmArgs {
  DType w_type;
  const uint8_t* w;
  int64_t row_bytes;
  const uint8_t* x8;
  int64_t x8_pair_bytes;
  int64_t n_total;
  int64_t k;
  const QuantizedRows* x;
  const float* bias;  // null: none
  float* y;
  int64_t ldy;
  int64_t m_begin, m_end;
  int64_t g_begin, g_end;
};

// Quantizes `rows` rows of `heads` heads of head_dim floats (row r, head h
// at x + r * ldx + h * head_dim) to int8 with one scale per (row, head):
// scale = max|x| / 127, q = round-half-even(x * (1 / scale)) (0 when the
// scale is 0). Row r's q at q + r * heads * head_dim, its scales at
// scales + r * heads.
struct KvQuantizeArgs {
  const float* x;
  int64_t ldx;
  int64_t rows;
  int64_t heads;
  int64_t head_dim;
  int8_t* q;
  float* scales;
};

// Paged attention over an int8 cache: `base` as for the float kernels with
// k_pool/v_pool holding int8 values, and per-slot scales
// [num_blocks][block_size][kv_heads] beside them. Key j's element c stands
// for k_scales[slot j] * k[j][c]. `base.scratch` holds
// AttentionI8ScratchFloats(...) floats.
struct AttentionI8Args {
  AttentionArgs base;
  const float* k_scales;
  const float* v_scales;
};

inline int64_t AttentionI8ScratchFloats(int64_t heads, int64_t block_size, int64_t head_dim) {
  return AttentionScratchFloats(heads, block_size, head_dim) + block_size + 16;
}

struct QuantKernelTable {
  Isa isa;
  const char* name;  // "avx512-vnni", "avx-vnni", "avx2", "scalar", ...
  void (*quantize_rows)(const QuantizeRowsArgs&);
  void (*gemm)(const QuantGemmArgs&);
  void (*kv_quantize)(const KvQuantizeArgs&);
  void (*attention_i8)(const AttentionI8Args&);
};

// The table for `isa`: the AVX-512 one picks its VNNI variant when the CPU
// has AVX512-VNNI, and for AVX2 the "avx-vnni" table (the AVX2 kernels
// with a 256-bit vpdpbusd GEMM) replaces "avx2" when the CPU has AVX-VNNI
// (as GetCpuInfo reports it: KILN_ISA=avx2 turns it off). REQUIRES:
// IsaAvailable(isa) for running its kernels.
const QuantKernelTable& QuantKernelsFor(Isa isa);

namespace qref {
const QuantKernelTable& Table();
}
namespace qavx2 {
const QuantKernelTable& Table();
}
namespace qavxvnni {
const QuantKernelTable& Table();
}
namespace qavx512 {
const QuantKernelTable& Table();
}

}  // namespace kiln::cpu
