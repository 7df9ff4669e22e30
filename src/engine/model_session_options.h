// How a model session is compiled and how big its KV cache is, whoever
// asks for one: the engine, `kiln eval`, `kiln diff`, `kiln inspect --plan`,
// calibration and the C API's sessions all state it here. ToCompileOptions
// and KvCacheBlocks are the one translation into the compiler's terms.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "compiler/compiled_model.h"
#include "core/dtype.h"
#include "core/status.h"
#include "engine/engine_options.h"

namespace kiln {

struct LoadedModel;
class ModelSession;
class WeightStore;

struct ModelSessionOptions {
  // Compilation.
  std::string backend = "cpu";  // what it cannot run falls back to the CPU
  Precision precision = Precision::kMixed;
  int threads = 0;                 // 0: one per physical core
  int64_t max_batch_tokens = 512;  // tokens in one forward pass at most
  int64_t max_model_len = 0;       // 0: the model's max_position_embeddings
  int64_t max_seqs = 64;           // sequences in one forward pass at most
  int64_t block_size = 16;         // tokens per KV cache block
  DType kv_dtype = DType::kF32;
  // W8A8 on the CPU: the decoder layers' linears in int8, each input scaled
  // by its static clip where w8a8_clips has one, else per token.
  bool w8a8 = false;
  std::map<std::string, float> w8a8_clips;

  // The KV cache: with kv_tokens_per_seq set, room for max_seqs sequences
  // of that many tokens each, refused when more than the available memory;
  // else as kv_cache_memory says.
  int64_t kv_tokens_per_seq = 0;
  KvCacheMemory kv_cache_memory;
  // When set, exactly this many KV blocks, whatever the two above say (a
  // budget already shared out, see SharedKvCacheBlocks).
  int64_t kv_num_blocks = 0;
  // Sized from kv_cache_memory, for a model with both sliding-window and
  // full-attention layers: a window pool (KvCacheLayout) for the sliding
  // layers, of KvWindowPoolBlocks blocks when that is fewer than one
  // shared pool would have, else half of those (but at least what one
  // sequence may hold; none when that is not fewer), and the rest of the budget
  // to the full pool (which then has more blocks than one pool would). The
  // caller frees window blocks out of the window (the engine's
  // BlockManager), and every batch carries window_block_tables.
  bool kv_window_pool = false;

  // Tensor parallelism (EngineOptions has the story): the group the
  // compiled model's all-reduces sum over, and on rank 0 what each forward
  // pass calls first to hand its batch, and the session's shape, to the
  // other ranks.
  std::shared_ptr<Collective> collective;
  std::function<Status(const ForwardBatch&, const ModelSession&)> before_forward;
  // Pipeline parallelism, on rank 0: runs each pass (after before_forward)
  // in place of the session's model alone, which is the first stage's: its
  // layers here, the others' on the other ranks, the logits coming back.
  std::function<Status(const ForwardBatch&, ModelSession&, float* logits, int64_t logits_stride, const DumpFn* dump)>
      run_pass;
};

// The session the engine's options describe (the engine's own; `kiln eval`
// narrows it to one sequence). W8A8's static clips are calibrated or read
// here, as options.calibration and options.w8a8_clips say.
Expected<ModelSessionOptions> SessionOptionsFor(const EngineOptions& options, const LoadedModel& model);

// The compiler's options for a session.
CompileOptions ToCompileOptions(const ModelSessionOptions& options);

// The number of KV cache blocks of a session over `model` (compiled with
// `options`). Errors (resource exhausted) when the cache would hold no
// block or, sized by kv_tokens_per_seq, not fit in the available memory.
Expected<int64_t> KvCacheBlocks(const ModelSessionOptions& options, const CompiledModel& model);

// The blocks of each pool of a session's KV cache: window 0 for one pool.
struct KvPoolBlocks {
  int64_t full = 0;
  int64_t window = 0;
};
Expected<KvPoolBlocks> KvCachePoolBlocks(const ModelSessionOptions& options, const CompiledModel& model);

// The window pool's blocks: enough that it never runs out before the full
// pool. A running sequence holds the blocks of positions
// [c - window + 1, c + n) (c computed, n scheduled this pass): at most
// ceil((n + window - 1) / block_size) + 1; summed over max_seqs sequences
// whose n add up to at most max_batch_tokens, at most
// max_seqs + (max_batch_tokens + max_seqs * (window + block_size - 2)) / block_size,
// and never more than max_seqs sequences of max_model_len tokens need.
int64_t KvWindowPoolBlocks(int64_t window, int64_t block_size, int64_t max_seqs, int64_t max_batch_tokens,
                           int64_t max_model_len);

// The bytes of the KV cache kv_cache_memory asks for: as given, as a
// fraction of available memory, or by default enough for max_seqs sequences
// of max_model_len tokens within a fifth of available memory, blocks of
// `block_bytes` holding block_size tokens.
Expected<int64_t> KvCacheBudgetBytes(const ModelSessionOptions& options, int64_t block_bytes,
                                     int64_t max_model_len);

// Speculative decoding's target and draft models share one KV cache budget
// (options.kv_cache_memory, read as KvCacheBudgetBytes reads it for a block
// of both models' bytes together). Both caches get the number of blocks
// returned, so that each holds as many tokens as the other: the budget is
// split in proportion to each model's KV bytes per token. Errors (resource
// exhausted) when the budget holds no block of each.
Expected<int64_t> SharedKvCacheBlocks(const ModelSessionOptions& options, int64_t max_model_len,
                                      int64_t target_block_bytes, int64_t draft_block_bytes);

// The model alone, compiled as a session with these options would compile
// it (for `kiln inspect --plan`, which runs nothing).
Expected<std::unique_ptr<CompiledModel>> CompileForSession(const WeightStore& weights,
                                                           const ModelSessionOptions& options);

}  // namespace kiln
