// The per-ISA kernel entry points behind the public kernel functions: one
// table of function pointers per instruction set, chosen at run time. Each
// entry computes one piece of an op on the calling thread; the public
// functions (linear.h, rms_norm.h, ...) split the work over threads.
//
// This header is included by the ISA-specific translation units, so it holds
// plain data, and the one helper here is called only from baseline code: an
// inline function compiled for a wider ISA could otherwise be the copy the
// linker keeps.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/isa.h"

namespace kiln::cpu {

// Element types the float kernels read and write.
enum class ElemType : uint8_t { kF32, kF16, kBF16 };

// Packed linear weights are panels of kPanelWidth output rows (see packed_weight.h).
inline constexpr int kPanelWidth = 16;
// Scratch the linear kernel may use for converted weight blocks, in floats.
inline constexpr int64_t kLinearScratchFloats = 256 * 8 * kPanelWidth;

// y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for m in [m_begin, m_end) and
// n in panels [panel_begin, panel_end) (n < n_total).
struct LinearArgs {
  const float* x;
  int64_t ldx;
  ElemType w_type;
  const void* w_panels;  // ceil(n_total / 16) panels of [k_total][16]
  int64_t n_total;
  int64_t k_total;
  const float* bias;  // null: none
  float* y;
  int64_t ldy;
  int64_t m_begin, m_end;
  int64_t panel_begin, panel_end;
  float* scratch;  // kLinearScratchFloats, 64-byte aligned
};

// For tokens t in [t_begin, t_end) and heads h < heads, the row
// r = x + t * ldx + h * dim: if residual is set, residual_row = r +
// (residual_in's row, or residual's own where residual_in is null) first
// and the sum is normalized; y_row = weight * row / sqrt(mean(row^2) + eps).
// Reading residual_in rather than copying it into residual beforehand
// keeps each row on the thread that sums it.
struct RmsNormArgs {
  const float* x;
  int64_t ldx;
  float* residual;  // null: plain RMSNorm
  int64_t ld_residual;
  float* y;
  int64_t ldy;
  const float* weight;
  int64_t dim;
  int64_t heads;
  int64_t t_begin, t_end;
  float eps;
  const float* residual_in = nullptr;
  int64_t ld_residual_in = 0;
};

// Rotates pairs of each head of tokens [t_begin, t_end) in place by the
// angles of the token's position; with src set, each token's heads are
// first copied from src's row (src + t * ld_src) into x's, by the thread
// that rotates them.
struct RopeArgs {
  float* x;
  int64_t ldx;
  int64_t heads;
  int64_t head_dim;
  int64_t rotary_dim;
  bool interleaved;  // pairs (2i, 2i+1); else (i, i + rotary_dim/2)
  const int32_t* positions;
  const float* cos;  // [position][rotary_dim / 2]
  const float* sin;
  int64_t t_begin, t_end;
  const float* src = nullptr;
  int64_t ld_src = 0;
};

// An elementwise op over `rows` x `cols`: out = f(a, b, scalar).
struct ElementwiseArgs {
  const float* a;
  int64_t lda;
  const float* b;  // null for unary ops
  int64_t ldb;
  float* out;
  int64_t ldo;
  int64_t rows, cols;
  float scalar;
};

// Converts `rows` x `cols` elements between types (lengths in elements).
struct ConvertArgs {
  const void* src;
  int64_t lds;
  void* dst;
  int64_t ldd;
  int64_t rows, cols;
};

// out[r, c] = softmax over c in [begin_r, end_r) of scale * x[r, c]; 0 for
// c outside. begin/end null: the whole row.
struct SoftmaxArgs {
  const float* x;
  int64_t ldx;
  float* out;
  int64_t ldo;
  int64_t rows, cols;
  float scale;
  const int32_t* valid_begin;
  const int32_t* valid_end;
};

// Rows [m_begin, m_end) of C = A * B (or A * B^T), f32.
struct MatMulArgs {
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  bool transpose_b;
  float* c;
  int64_t ldc;
  int64_t m_begin, m_end;
  int64_t n, k;
};

// Attention of query tokens over their sequence's paged keys and values,
// for query heads [h_begin, h_end), which share KV head h_begin / group.
// Several tokens at consecutive positions of one sequence (a verification
// pass's drafted tokens, a prefill chunk) go in one call, so that their
// rows walk the keys together: each row's arithmetic is the same as alone.
struct AttentionArgs {
  const float* q;  // token 0's row: head h at q + h * head_dim
  float* out;      // likewise
  int32_t h_begin, h_end;
  int32_t group;  // query heads per KV head
  int32_t kv_head;
  int32_t head_dim;
  float scale;
  int32_t first_pos, last_pos;  // token 0's keys: positions [first_pos, last_pos]
  const int32_t* block_table;
  ElemType kv_type;
  const void* k_pool;  // [num_blocks][block_size][kv_heads][head_dim]
  const void* v_pool;
  int32_t block_size;
  int32_t kv_heads;
  float* scratch;  // AttentionScratchFloats((h_end - h_begin) * tokens, block_size, head_dim)
  // Token t (< tokens, at most kMaxAttentionTokens) is at position
  // last_pos + t, its row at q + t * ldq (out + t * ldo), and sees keys from
  // max(0, last_pos + t - window + 1) (window > 0) or first_pos. The int8
  // cache's kernels take one token.
  int32_t tokens = 1;
  int64_t ldq = 0, ldo = 0;
  int32_t window = 0;
  // > 0: each scaled score s becomes softcap * tanh(s / softcap) (Gemma 2).
  float softcap = 0.0f;
};
inline constexpr int32_t kMaxAttentionTokens = 8;

// The first key position of token t of `a` (AttentionArgs::tokens).
inline int32_t AttentionFirstPos(const AttentionArgs& a, int32_t t) {
  if (t == 0 || a.window <= 0) return a.first_pos;
  const int32_t first = a.last_pos + t - a.window + 1;
  return first > 0 ? first : 0;
}

// Per thread, for `heads` rows (query heads times tokens): each row's
// weights, sums and running values, its rescaling factor for each chunk of
// a block (at most one a key), and a chunk of keys transposed (up to 16
// lanes of head_dim).
inline int64_t AttentionScratchFloats(int64_t heads, int64_t block_size, int64_t head_dim) {
  return heads * (2 * block_size + head_dim + 16) + block_size + 64 + 16 * head_dim;
}

// y[i] = f(x[i]) for i < n; the vector math functions, exposed for testing.
struct MathArgs {
  const float* x;
  float* y;
  int64_t n;
};

struct KernelTable {
  Isa isa;
  void (*linear)(const LinearArgs&);
  void (*rms_norm)(const RmsNormArgs&);
  void (*rope)(const RopeArgs&);
  // Elementwise.
  void (*add)(const ElementwiseArgs&);        // a + b
  void (*mul)(const ElementwiseArgs&);        // a * b
  void (*scale)(const ElementwiseArgs&);      // a * scalar
  void (*silu_mul)(const ElementwiseArgs&);   // silu(a) * b
  void (*gelu)(const ElementwiseArgs&);       // gelu_erf(a)
  void (*gelu_tanh)(const ElementwiseArgs&);  // gelu_tanh(a)
  void (*gelu_mul)(const ElementwiseArgs&);   // gelu_erf(a) * b
  void (*gelu_tanh_mul)(const ElementwiseArgs&);
  // Conversions.
  void (*f32_to_bf16)(const ConvertArgs&);
  void (*bf16_to_f32)(const ConvertArgs&);
  void (*f32_to_f16)(const ConvertArgs&);
  void (*f16_to_f32)(const ConvertArgs&);
  void (*softmax)(const SoftmaxArgs&);
  void (*matmul)(const MatMulArgs&);
  void (*attention)(const AttentionArgs&);
  // Vector math.
  void (*exp)(const MathArgs&);
  void (*tanh)(const MathArgs&);
  void (*erf)(const MathArgs&);
};

// The table for `isa`. REQUIRES: IsaAvailable(isa) for running its kernels
// (the table itself can be fetched on any CPU).
const KernelTable& KernelsFor(Isa isa);

namespace ref {
const KernelTable& Table();
}
namespace avx2 {
const KernelTable& Table();
}
namespace avx512 {
const KernelTable& Table();
}

}  // namespace kiln::cpu
