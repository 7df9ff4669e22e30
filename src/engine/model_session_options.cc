// From the options users give to what the compiler and the KV cache take.
#include "engine/model_session_options.h"

#include <algorithm>
#include <limits>

#include "backend/kv_cache.h"
#include "core/system_memory.h"
#include "engine/calibration.h"
#include "engine/model_loader.h"
#include "format/weight_store.h"

namespace kiln {

Expected<ModelSessionOptions> SessionOptionsFor(const EngineOptions& options, const LoadedModel& model) {
  ModelSessionOptions s;
  s.backend = options.backend;
  s.precision = options.precision;
  s.threads = options.threads;
  s.max_batch_tokens = options.max_num_batched_tokens;
  s.max_model_len = options.max_model_len;
  s.max_seqs = options.max_num_seqs;
  s.block_size = options.block_size;
  s.kv_dtype = options.kv_cache_dtype;
  s.kv_cache_memory = options.kv_cache_memory;
  s.collective = options.collective;
  s.before_forward = options.before_forward;
  s.run_pass = options.pipeline_run_pass;
  if (options.w8a8) {
    if (model.weights == nullptr) return InvalidArgument("W8A8: no weights");
    // Static clips from --calibration or --w8a8-clips, else every input
    // quantized per token at run time.
    s.w8a8 = true;
    CalibrationOptions calibration;
    calibration.percentile = options.calibration_percentile;
    calibration.threads = options.threads;
    KILN_ASSIGN_OR_RETURN(s.w8a8_clips,
                          ResolveActivationClips(*model.weights, model.tokenizer.get(), options.calibration,
                                                 options.w8a8_clips, calibration));
  }
  return s;
}

CompileOptions ToCompileOptions(const ModelSessionOptions& options) {
  CompileOptions co;
  co.backend = options.backend;
  co.precision = options.precision;
  co.fuse.precision = options.precision;
  co.max_batch_tokens = options.max_batch_tokens;
  co.max_model_len = options.max_model_len;
  co.max_seqs = options.max_seqs;
  co.block_size = options.block_size;
  co.kv_dtype = options.kv_dtype;
  co.threads = options.threads;
  co.w8a8.enabled = options.w8a8;
  co.w8a8.input_clips = options.w8a8_clips;
  co.collective = options.collective;
  return co;
}

Expected<int64_t> KvCacheBudgetBytes(const ModelSessionOptions& options, int64_t block_bytes,
                                     int64_t max_model_len) {
  int64_t bytes = options.kv_cache_memory.bytes;
  if (bytes > 0) return bytes;
  const int64_t available = AvailableMemoryBytes();
  if (options.kv_cache_memory.fraction > 0) {
    if (available <= 0) return Unsupported("KV cache memory as a fraction: available memory is unknown here");
    return static_cast<int64_t>(options.kv_cache_memory.fraction * static_cast<double>(available));
  }
  const int64_t blocks_per_seq = (max_model_len + options.block_size - 1) / options.block_size;
  bytes = options.max_seqs * blocks_per_seq * block_bytes;
  if (available > 0) bytes = std::min(bytes, available / 5);
  return bytes;
}

Expected<int64_t> SharedKvCacheBlocks(const ModelSessionOptions& options, int64_t max_model_len,
                                      int64_t target_block_bytes, int64_t draft_block_bytes) {
  const int64_t pair_bytes = target_block_bytes + draft_block_bytes;
  KILN_ASSIGN_OR_RETURN(int64_t bytes, KvCacheBudgetBytes(options, pair_bytes, max_model_len));
  const int64_t num_blocks = std::min<int64_t>(pair_bytes > 0 ? bytes / pair_bytes : 0, INT32_MAX);
  if (num_blocks < 1) {
    return ResourceExhausted(
        "KV cache memory of {} bytes holds no block of the model and its draft ({} + {} bytes for {} "
        "tokens); raise --kv-cache-memory",
        bytes, target_block_bytes, draft_block_bytes, options.block_size);
  }
  return num_blocks;
}

Expected<int64_t> KvCacheBlocks(const ModelSessionOptions& options, const CompiledModel& model) {
  if (options.kv_num_blocks > 0) return options.kv_num_blocks;
  const KvCacheLayout one_block = model.MakeKvLayout(1);
  const int64_t block_bytes = one_block.BlockBytes();
  const int64_t available = AvailableMemoryBytes();
  if (options.kv_tokens_per_seq > 0) {
    // Every sequence can always reach its length.
    const int64_t blocks_per_seq = (options.kv_tokens_per_seq + options.block_size - 1) / options.block_size;
    const int64_t num_blocks = blocks_per_seq * options.max_seqs;
    const double bytes = static_cast<double>(num_blocks) * static_cast<double>(block_bytes);
    if (num_blocks > std::numeric_limits<int32_t>::max() ||
        (available > 0 && bytes > static_cast<double>(available))) {
      return ResourceExhausted(
          "a KV cache for {} sequences of {} tokens needs {:.0f} bytes, more than the {} bytes available; "
          "lower max_seqs or max_tokens_per_seq",
          options.max_seqs, options.kv_tokens_per_seq, bytes, available);
    }
    return num_blocks;
  }
  KILN_ASSIGN_OR_RETURN(int64_t bytes, KvCacheBudgetBytes(options, block_bytes, model.max_model_len()));
  const int64_t num_blocks = std::min<int64_t>(KvBlocksForBytes(one_block, bytes), INT32_MAX);
  if (num_blocks < 1) {
    return ResourceExhausted(
        "KV cache memory of {} bytes holds no block ({} bytes for {} tokens); raise --kv-cache-memory", bytes,
        block_bytes, options.block_size);
  }
  return num_blocks;
}

int64_t KvWindowPoolBlocks(int64_t window, int64_t block_size, int64_t max_seqs, int64_t max_batch_tokens,
                           int64_t max_model_len) {
  const int64_t bound = max_seqs + (max_batch_tokens + max_seqs * (window + block_size - 2)) / block_size;
  const int64_t whole = max_seqs * ((max_model_len + block_size - 1) / block_size);
  return std::min(bound, whole);
}

Expected<KvPoolBlocks> KvCachePoolBlocks(const ModelSessionOptions& options, const CompiledModel& model) {
  KvPoolBlocks pools;
  KILN_ASSIGN_OR_RETURN(pools.full, KvCacheBlocks(options, model));
  if (!options.kv_window_pool || options.kv_num_blocks > 0 || options.kv_tokens_per_seq > 0 ||
      !model.CanUseWindowPool()) {
    return pools;
  }
  const KvCacheLayout layout = model.MakeKvLayout(1, 1);
  KILN_ASSIGN_OR_RETURN(int64_t bytes, KvCacheBudgetBytes(options, layout.BlockBytes(), model.max_model_len()));
  // The window pool frees room only while it has fewer blocks than one
  // shared pool would: when the size that never runs out is not that
  // small, half of those blocks (the scheduler then preempts for
  // whichever pool runs out)...
  int64_t window = KvWindowPoolBlocks(model.config().sliding_window, options.block_size, options.max_seqs,
                                      options.max_batch_tokens, model.max_model_len());
  // ... but never fewer than one sequence may need in a pass, so that a
  // request the full pool can hold always runs.
  const int64_t one_sequence =
      KvWindowPoolBlocks(model.config().sliding_window, options.block_size, 1, options.max_batch_tokens,
                         model.max_model_len());
  if (window >= pools.full) window = std::max(pools.full / 2, one_sequence);
  if (window >= pools.full) return pools;
  const int64_t rest = bytes - window * layout.WindowBlockBytes();
  pools.full = std::min<int64_t>(rest / layout.FullBlockBytes(), INT32_MAX);
  pools.window = window;
  return pools;
}

Expected<std::unique_ptr<CompiledModel>> CompileForSession(const WeightStore& weights,
                                                           const ModelSessionOptions& options) {
  return CompiledModel::Compile(weights, ToCompileOptions(options));
}

}  // namespace kiln
