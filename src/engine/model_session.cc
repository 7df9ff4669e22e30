// Compiling a model with its KV cache, and its forward passes.
#include "engine/model_session.h"

#include "backend/forward_batch.h"
#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
#include "core/log.h"
#include "format/weight_store.h"

namespace kiln {

ModelSession::~ModelSession() = default;

Expected<std::unique_ptr<ModelSession>> ModelSession::Create(const WeightStore& weights,
                                                             const ModelSessionOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, CompileForSession(weights, options));
  return Create(std::move(model), options);
}

Expected<std::unique_ptr<ModelSession>> ModelSession::Create(std::unique_ptr<CompiledModel> model,
                                                             const ModelSessionOptions& options) {
  auto session = std::unique_ptr<ModelSession>(new ModelSession());
  session->options_ = options;
  session->model_ = std::move(model);
  KILN_ASSIGN_OR_RETURN(KvPoolBlocks pools, KvCachePoolBlocks(options, *session->model_));
  const int64_t num_blocks = pools.full;
  KILN_ASSIGN_OR_RETURN(session->kv_cache_, session->model_->AllocateKvCache(num_blocks, pools.window));
  session->blocks_in_order_.resize(static_cast<size_t>(num_blocks));
  for (int64_t b = 0; b < num_blocks; ++b) {
    session->blocks_in_order_[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  }
  const ModelConfig& c = session->config();
  if (c.pipeline_stages > 1 && options.run_pass) {
    // Rank 0's (the others say as much when its first pass gives them its shape).
    KILN_LOG_INFO("pipeline parallel rank 0: layers {} to {}, {} MiB of weights, {} KV blocks of {} tokens ({} MiB)",
                  c.StageLayerBegin(), c.StageLayerEnd() - 1, session->model_->weights().TotalBytes() >> 20,
                  num_blocks, options.block_size,
                  (num_blocks * session->kv_cache_->layout().BlockBytes()) >> 20);
  }
  return session;
}

const ModelConfig& ModelSession::config() const { return model_->config(); }
int64_t ModelSession::num_kv_blocks() const { return kv_cache_->layout().num_blocks; }
int64_t ModelSession::num_window_kv_blocks() const { return kv_cache_->layout().window_num_blocks; }
int64_t ModelSession::max_batch_tokens() const { return model_->max_batch_tokens(); }
int64_t ModelSession::max_model_len() const { return model_->max_model_len(); }

Status ModelSession::Forward(const ForwardBatch& batch, float* logits, int64_t logits_stride,
                             const DumpFn* dump) {
  if (options_.before_forward) KILN_RETURN_IF_ERROR(options_.before_forward(batch, *this));
  if (options_.run_pass) return options_.run_pass(batch, *this, logits, logits_stride, dump);
  return model_->Forward(batch, *kv_cache_, logits, logits_stride, dump);
}

Status ModelSession::ForwardStage(const ForwardBatch& batch, const float* hidden_in, float* out, int64_t out_stride,
                                  const DumpFn* dump) {
  return model_->Forward(batch, *kv_cache_, out, out_stride, dump, hidden_in);
}

Status ModelSession::ForwardSequence(std::span<const int32_t> ids, int32_t first_position,
                                     std::span<const int32_t> output_rows, float* logits,
                                     const DumpFn* dump) {
  if (num_window_kv_blocks() > 0) {
    return Unsupported("a single-sequence pass over a KV cache with a window pool (it takes window block tables)");
  }
  const int64_t capacity = num_kv_blocks() * block_size();
  const int64_t end = int64_t{first_position} + static_cast<int64_t>(ids.size());
  if (first_position < 0 || end > capacity) {
    return OutOfRange("positions [{}, {}) of a sequence outside the session's KV cache of {} tokens",
                      first_position, end, capacity);
  }
  const auto n = static_cast<int32_t>(ids.size());
  positions_.resize(ids.size());
  for (int32_t i = 0; i < n; ++i) positions_[static_cast<size_t>(i)] = first_position + i;
  token_seq_.assign(ids.size(), 0);
  const int32_t query_start[2] = {0, n};
  const auto seq_len = static_cast<int32_t>(end);
  const int32_t* tables[1] = {blocks_in_order_.data()};
  ForwardBatch b;
  b.num_tokens = n;
  b.token_ids = ids.data();
  b.positions = positions_.data();
  b.token_seq = token_seq_.data();
  b.num_seqs = 1;
  b.query_start = query_start;
  b.seq_lens = &seq_len;
  b.block_tables = tables;
  b.num_output_rows = static_cast<int32_t>(output_rows.size());
  b.output_rows = output_rows.data();
  return Forward(b, logits, config().vocab_size, dump);
}

}  // namespace kiln
