// One layer's paged KV cache as the kernels see it, and the kernels that
// write new tokens into it and copy a sequence back out.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"
#include "core/dtype.h"
#include "core/status.h"

namespace kiln::cpu {

// K and V pools of num_blocks fixed-size blocks, each
// [block_size][kv_heads][head_dim] elements of dtype (F32, F16, BF16 or I8).
// A token's slot is block_id * block_size + offset in block. An I8 cache
// also has scale pools [num_blocks][block_size][kv_heads]: element c of
// head h at slot s stands for k_scale[s * kv_heads + h] * k[...]. Not owning.
struct KvCacheView {
  DType dtype = DType::kF32;
  void* k = nullptr;
  void* v = nullptr;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  float* k_scale = nullptr;  // I8 only
  float* v_scale = nullptr;

  // Elements of one token's K (or V) row: kv_heads * head_dim.
  int64_t row_elements() const { return static_cast<int64_t>(kv_heads) * head_dim; }
};

// Checks that the view describes a usable cache: a supported dtype, positive
// sizes, non-null pools (and scale pools for I8).
Status CheckKvCache(const KvCacheView& cache);

// Stores token t's k and v rows (row_elements() floats at k + t * ldk and
// v + t * ldv: they may be column slices of a fused QKV output) at slot
// slots[t], converted to the cache dtype (round to nearest even; for I8,
// each head quantized with scale max|x| / 127, see qkernel_table.h). Tokens
// with a negative slot (padding) are skipped.
// REQUIRES: CheckKvCache(cache) is ok; slots[t] < num_blocks * block_size;
// no two tokens share a slot.
void KvWrite(const KernelContext& ctx, const KvCacheView& cache, int64_t tokens, const int32_t* slots,
             const float* k, int64_t ldk, const float* v, int64_t ldv);

// Copies positions [0, positions) of one sequence, whose block table is
// block_table, out of the pools as fp32 rows of row_elements():
// position p to k_out + p * ldk and v_out + p * ldv. For the decomposed
// attention path only; the fused kernel reads the pools in place.
// A -1 entry (a block released before a sliding window) gathers zeros.
// REQUIRES: the table covers `positions` with valid block ids or -1.
void GatherKv(const KernelContext& ctx, const KvCacheView& cache, const int32_t* block_table,
              int64_t positions, float* k_out, int64_t ldk, float* v_out, int64_t ldv);

}  // namespace kiln::cpu
