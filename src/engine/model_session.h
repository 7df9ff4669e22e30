// A model compiled for this machine together with its KV cache: what every
// forward pass in kiln runs on (the engine, perplexity, `kiln diff`,
// calibration and the C API's sessions). The cache lives in the memory of
// the backend that runs attention; which sequence owns which block is the
// caller's business.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compiler/program.h"
#include "core/status.h"
#include "engine/model_session_options.h"

namespace kiln {

class CompiledModel;
class KvCache;
class WeightStore;
struct ForwardBatch;
struct ModelConfig;

class ModelSession {
 public:
  // Compiles `weights` (which must outlive the session) and allocates the
  // KV cache, both as `options` say.
  static Expected<std::unique_ptr<ModelSession>> Create(const WeightStore& weights,
                                                        const ModelSessionOptions& options);
  // The same over a model already compiled with `options`.
  static Expected<std::unique_ptr<ModelSession>> Create(std::unique_ptr<CompiledModel> model,
                                                        const ModelSessionOptions& options);

  ~ModelSession();
  ModelSession(const ModelSession&) = delete;
  ModelSession& operator=(const ModelSession&) = delete;

  CompiledModel& model() { return *model_; }
  const CompiledModel& model() const { return *model_; }
  KvCache& kv_cache() { return *kv_cache_; }
  const KvCache& kv_cache() const { return *kv_cache_; }
  const ModelSessionOptions& options() const { return options_; }
  const ModelConfig& config() const;
  int64_t num_kv_blocks() const;
  // The window pool's blocks (KvCacheLayout); 0 without one.
  int64_t num_window_kv_blocks() const;
  int64_t block_size() const { return options_.block_size; }
  // Tokens in one forward pass at most: the one batch limit (longer runs
  // are split into passes of at most this many tokens).
  int64_t max_batch_tokens() const;
  int64_t max_model_len() const;

  // One forward pass over the session's KV cache (see
  // CompiledModel::Forward). Not reentrant: one pass at a time.
  Status Forward(const ForwardBatch& batch, float* logits, int64_t logits_stride,
                 const DumpFn* dump = nullptr);

  // Pipeline parallelism: one pass of this session's stage alone (no
  // before_forward, no run_pass): the hidden state of the stage before in
  // `hidden_in` (but on the first stage), this stage's output (the hidden
  // state of every token, or on the last stage the output rows' logits) in
  // `out`, rows `out_stride` floats apart.
  Status ForwardStage(const ForwardBatch& batch, const float* hidden_in, float* out, int64_t out_stride,
                      const DumpFn* dump = nullptr);

  // A pass over a single sequence held in blocks 0, 1, ... of the cache:
  // `ids` at positions first_position onwards (the earlier positions are in
  // the cache already); the logits of the batch rows `output_rows` go to
  // `logits`, one row of vocab_size floats each. Errors when the sequence
  // would outgrow the cache, or the cache has a window pool.
  Status ForwardSequence(std::span<const int32_t> ids, int32_t first_position,
                         std::span<const int32_t> output_rows, float* logits, const DumpFn* dump = nullptr);

 private:
  ModelSession() = default;

  ModelSessionOptions options_;
  std::unique_ptr<CompiledModel> model_;
  std::unique_ptr<KvCache> kv_cache_;
  // ForwardSequence's metadata, reused between passes.
  std::vector<int32_t> blocks_in_order_, positions_, token_seq_;
};

}  // namespace kiln
