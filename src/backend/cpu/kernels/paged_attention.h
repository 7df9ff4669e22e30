// Attention of a batch of query tokens over the paged KV cache, read in
// place: any mix of prefill chunks and decode steps of different sequences.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"
#include "backend/cpu/kernels/kv_cache.h"
#include "core/status.h"

namespace kiln::cpu {

// Which sequence each query token belongs to, where it stands in it, and
// each sequence's block table (block ids for positions 0, block_size, ...).
struct AttentionBatch {
  int32_t num_tokens = 0;
  const int32_t* token_seq = nullptr;  // [num_tokens] index into the tables
  const int32_t* token_pos = nullptr;  // [num_tokens] position in its sequence
  int32_t num_seqs = 0;
  const int32_t* const* block_tables = nullptr;  // [num_seqs]
  const int32_t* block_table_lens = nullptr;     // [num_seqs] entries of each
};

struct AttentionParams {
  int32_t num_heads = 0;  // query heads; a multiple of the cache's kv_heads
  float scale = 0.0f;     // usually 1 / sqrt(head_dim)
  int32_t window = 0;     // sliding window in positions; 0: unlimited
  float softcap = 0.0f;   // > 0: scores = softcap * tanh(scores / softcap) (Gemma 2)
};

// Checks the batch against the cache: sequence indices, non-negative
// positions covered by their block tables, block ids within the pools, heads
// divisible by kv_heads. With a window, entries wholly before the first key
// any of a sequence's tokens sees may be -1 (released); they are never read. O(tokens + table entries): cheap enough per step.
Status CheckAttentionBatch(const AttentionBatch& batch, const KvCacheView& cache,
                           const AttentionParams& params);

// For each token t and query head h: out = softmax(scale q k^T) v over the
// keys and values of t's sequence at positions max(0, p - window + 1) .. p
// (p = token_pos[t]), from KV head h / (num_heads / kv_heads). q and out rows
// are [num_heads][head_dim] at q + t * ldq and out + t * ldo (q may be a
// column slice of a fused QKV output). The token's own key must already be
// in the cache (KvWrite first).
//
// Deterministic: online softmax in fp32, keys in increasing position, tiled
// by the cache's blocks (aligned to absolute positions), so a (token, head)
// result depends only on its position and the cache: not on the other
// tokens in the batch, on prefill chunking or on the thread count.
// REQUIRES: CheckAttentionBatch(batch, cache, params) is ok; out overlaps no input.
void PagedAttention(const KernelContext& ctx, const AttentionBatch& batch, const KvCacheView& cache,
                    const AttentionParams& params, const float* q, int64_t ldq, float* out, int64_t ldo);

}  // namespace kiln::cpu
