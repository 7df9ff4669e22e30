// Paged attention: validation, and (token, KV head, head piece) work items
// claimed by the threads in chunks.
#include "backend/cpu/kernels/paged_attention.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/kv_prefetch.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "backend/cpu/kernels/parallel.h"
#include "backend/cpu/qkernels/qkernel_table.h"

namespace kiln::cpu {

Status CheckAttentionBatch(const AttentionBatch& batch, const KvCacheView& cache,
                           const AttentionParams& params) {
  KILN_RETURN_IF_ERROR(CheckKvCache(cache));
  if (params.num_heads <= 0 || params.num_heads % cache.kv_heads != 0) {
    return InvalidArgument("attention: {} query heads is not a positive multiple of {} kv heads",
                           params.num_heads, cache.kv_heads);
  }
  if (params.window < 0) return InvalidArgument("attention: negative window {}", params.window);
  if (!(params.softcap >= 0)) return InvalidArgument("attention: soft cap {} is not >= 0", params.softcap);
  if (batch.num_tokens < 0 || batch.num_seqs < 0) {
    return InvalidArgument("attention batch: {} tokens, {} sequences", batch.num_tokens, batch.num_seqs);
  }
  // With a window, the entries before the earliest key any of a
  // sequence's tokens sees may be -1 (released blocks).
  thread_local std::vector<int32_t> first_visible_storage;
  std::vector<int32_t>& first_visible = first_visible_storage;
  first_visible.assign(static_cast<size_t>(std::max(batch.num_seqs, 0)), 0);
  if (params.window > 0) {
    std::fill(first_visible.begin(), first_visible.end(), INT32_MAX);
    for (int32_t t = 0; t < batch.num_tokens; ++t) {
      const int32_t s = batch.token_seq[t];
      if (s < 0 || s >= batch.num_seqs) continue;  // reported below
      int32_t& first = first_visible[static_cast<size_t>(s)];
      first = std::min(first, std::max(0, batch.token_pos[t] - params.window + 1));
    }
  }
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    const int32_t len = batch.block_table_lens[s];
    if (len < 0 || (len > 0 && batch.block_tables[s] == nullptr)) {
      return InvalidArgument("attention batch: sequence {}: block table of {} entries missing", s, len);
    }
    for (int32_t i = 0; i < len; ++i) {
      const int32_t block = batch.block_tables[s][i];
      const bool released = block == -1 && int64_t{i + 1} * cache.block_size <= first_visible[static_cast<size_t>(s)];
      if (released) continue;
      if (block < 0 || block >= cache.num_blocks) {
        return OutOfRange("attention batch: sequence {}: block table entry {} is block {}, outside [0, {})",
                          s, i, block, cache.num_blocks);
      }
    }
  }
  for (int32_t t = 0; t < batch.num_tokens; ++t) {
    const int32_t s = batch.token_seq[t];
    const int32_t pos = batch.token_pos[t];
    if (s < 0 || s >= batch.num_seqs) {
      return OutOfRange("attention batch: token {}: sequence {} outside [0, {})", t, s, batch.num_seqs);
    }
    if (pos < 0) return OutOfRange("attention batch: token {}: negative position {}", t, pos);
    if (pos / cache.block_size >= batch.block_table_lens[s]) {
      return OutOfRange(
          "attention batch: token {}: position {} needs block {} of sequence {}, whose table has {}", t, pos,
          pos / cache.block_size, s, batch.block_table_lens[s]);
    }
  }
  return Status::Ok();
}

void PagedAttention(const KernelContext& ctx, const AttentionBatch& batch, const KvCacheView& cache,
                    const AttentionParams& params, const float* q, int64_t ldq, float* out, int64_t ldo) {
  if (batch.num_tokens <= 0) return;
  const KernelTable& kernels = KernelsFor(ctx.isa);
  const int32_t group = params.num_heads / cache.kv_heads;
  const bool int8 = cache.dtype == DType::kI8;
  // Runs of tokens at consecutive positions of one sequence (a verification
  // pass's drafted tokens, a prefill chunk) are one work item each, up to
  // kMaxAttentionTokens: their rows walk the keys together, sharing each
  // block's setup and reads, and each row's chain of dependent steps
  // overlaps the others' (a 5-token pass of the tiny models took 6-12% less
  // time). The int8 kernels take one token.
  const int32_t max_run = int8 ? 1 : kMaxAttentionTokens;
  // Reused, so that a pass allocates nothing; named by reference, so that
  // the workers read the caller's.
  thread_local std::vector<int32_t> run_starts_storage;
  std::vector<int32_t>& run_starts = run_starts_storage;
  run_starts.clear();
  for (int32_t t = 0; t < batch.num_tokens; ++t) {
    const bool joins = !run_starts.empty() && t - run_starts.back() < max_run &&
                       batch.token_seq[t] == batch.token_seq[t - 1] &&
                       batch.token_pos[t] == batch.token_pos[t - 1] + 1;
    if (!joins) run_starts.push_back(t);
  }
  const auto runs = static_cast<int64_t>(run_starts.size());
  run_starts.push_back(batch.num_tokens);
  const int64_t groups = runs * cache.kv_heads;
  // Few tokens (decoding) leave threads idle: split each KV group's query
  // heads too. Heads are computed independently, so the split changes nothing.
  const int64_t threads = ctx.num_threads();
  const int64_t pieces = groups >= threads ? 1 : std::min<int64_t>(group, (threads + groups - 1) / groups);
  const QuantKernelTable& qkernels = QuantKernelsFor(ctx.isa);
  const int64_t scratch_floats = int8 ? AttentionI8ScratchFloats(group, cache.block_size, cache.head_dim)
                                      : AttentionScratchFloats(int64_t{group} * max_run, cache.block_size,
                                                               cache.head_dim);

  // An item's cost grows with its tokens' positions, so a fixed split of a
  // prefill chunk would leave the thread with the early tokens idle for half
  // the call. Threads claim small chunks instead, last items (in a chunk,
  // the latest positions: the dearest) first, and at least two items a
  // chunk, so that each item's first block of keys and values is fetched
  // while the one before it computes (the kernel fetches the blocks after
  // the first itself).
  const int64_t items = groups * pieces;
  const int64_t chunk = std::max<int64_t>(items >= 4 * threads ? 2 : 1, items / (threads * 16));
  const int64_t elem_bytes = static_cast<int64_t>(DTypeBytes(cache.dtype, 1).value_or(1));
  const int64_t row_bytes = cache.head_dim * elem_bytes;
  const int64_t block_bytes = static_cast<int64_t>(cache.block_size) * cache.kv_heads * row_bytes;
  auto first_pos = [&](int32_t pos) { return params.window > 0 ? std::max(0, pos - params.window + 1) : 0; };
  auto prefetch_first_block = [&](int64_t item) {
    const int32_t t = run_starts[static_cast<size_t>(item / (cache.kv_heads * pieces))];
    const int64_t kv_head = item / pieces % cache.kv_heads;
    const int32_t block = batch.block_tables[batch.token_seq[t]][first_pos(batch.token_pos[t]) / cache.block_size];
    PrefetchKvRows(cache.k, cache.v, block * block_bytes + kv_head * row_bytes, cache.kv_heads * row_bytes, row_bytes,
                   0, cache.block_size);
  };
  ParallelChunks(ctx, items, chunk, [&](int64_t begin, int64_t end, int) {
    float* scratch = ThreadScratch(ScratchSlot::kAttention, scratch_floats);
    for (int64_t item = items - 1 - begin; item > items - 1 - end; --item) {
      const auto run = static_cast<size_t>(item / (cache.kv_heads * pieces));
      const int32_t t = run_starts[run];
      const int32_t kv_head = static_cast<int32_t>(item / pieces % cache.kv_heads);
      const IndexRange heads =
          ThreadPool::StaticRange(group, static_cast<int>(pieces), static_cast<int>(item % pieces));
      if (heads.begin == heads.end) continue;
      if (item - 1 > items - 1 - end && !int8) prefetch_first_block(item - 1);
      const int32_t pos = batch.token_pos[t];
      AttentionArgs args{};
      args.q = q + t * ldq;
      args.out = out + t * ldo;
      args.h_begin = kv_head * group + static_cast<int32_t>(heads.begin);
      args.h_end = kv_head * group + static_cast<int32_t>(heads.end);
      args.group = group;
      args.kv_head = kv_head;
      args.head_dim = cache.head_dim;
      args.scale = params.scale;
      args.first_pos = first_pos(pos);
      args.last_pos = pos;
      args.block_table = batch.block_tables[batch.token_seq[t]];
      args.kv_type = ElemTypeOf(cache.dtype);
      args.k_pool = cache.k;
      args.v_pool = cache.v;
      args.block_size = cache.block_size;
      args.kv_heads = cache.kv_heads;
      args.scratch = scratch;
      args.tokens = run_starts[run + 1] - t;
      args.ldq = ldq;
      args.ldo = ldo;
      args.window = params.window;
      args.softcap = params.softcap;
      if (int8) {
        qkernels.attention_i8(AttentionI8Args{args, cache.k_scale, cache.v_scale});
      } else {
        kernels.attention(args);
      }
    }
  });
}

}  // namespace kiln::cpu
