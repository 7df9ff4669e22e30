// Forward passes over a session's own KV cache.
#include "capi/forward_session.h"

#include <algorithm>
#include <limits>

#include "backend/forward_batch.h"
#include "backend/kv_cache.h"
#include "backend/memory_domain.h"
#include "compiler/compiled_model.h"
#include "engine/engine_options.h"
#include "format/weight_store.h"

namespace kiln::capi {
namespace {

// Bounds on what a caller may ask for, so that a bad argument is an error
// rather than an enormous allocation.
constexpr int32_t kMaxSeqs = 1 << 16;
constexpr int32_t kMaxBatchTokens = 1 << 16;

}  // namespace

ForwardSession::ForwardSession(LoadedModel model, const SessionOptions& options)
    : model_(std::move(model)), options_(options) {}

ForwardSession::~ForwardSession() = default;

Expected<std::unique_ptr<ForwardSession>> ForwardSession::Create(LoadedModel model,
                                                                 const SessionOptions& options) {
  if (model.weights == nullptr) return InvalidArgument("session: the model has no weights");
  const ModelConfig& config = model.weights->config();
  SessionOptions o = options;
  if (o.max_seqs < 1 || o.max_seqs > kMaxSeqs) {
    return InvalidArgument("max_seqs must be in [1, {}], got {}", kMaxSeqs, o.max_seqs);
  }
  if (o.max_tokens_per_seq < 0) {
    return InvalidArgument("max_tokens_per_seq must be >= 0 (0: the model's context), got {}",
                           o.max_tokens_per_seq);
  }
  const int64_t context =
      std::min<int64_t>(config.max_position_embeddings, std::numeric_limits<int32_t>::max());
  if (o.max_tokens_per_seq == 0) o.max_tokens_per_seq = static_cast<int32_t>(context);
  if (o.max_tokens_per_seq < 1)
    return InvalidArgument("the model states no context length; give max_tokens_per_seq");
  if (context > 0 && o.max_tokens_per_seq > context) {
    return OutOfRange("max_tokens_per_seq {} beyond the model's context of {} tokens", o.max_tokens_per_seq,
                      context);
  }
  if (o.max_batch_tokens < 1 || o.max_batch_tokens > kMaxBatchTokens) {
    return InvalidArgument("max_batch_tokens must be in [1, {}], got {}", kMaxBatchTokens,
                           o.max_batch_tokens);
  }
  if (o.block_size < 1 || o.block_size > 1024) {
    return InvalidArgument("block_size must be in [1, 1024], got {}", o.block_size);
  }
  if (o.threads < 0)
    return InvalidArgument("threads must be >= 0 (0: one per physical core), got {}", o.threads);
  if (o.kv_dtype != DType::kF32 && o.kv_dtype != DType::kF16 && o.kv_dtype != DType::kBF16) {
    return InvalidArgument("KV cache dtype {}: expected f32, f16 or bf16", DTypeName(o.kv_dtype));
  }

  // Every sequence can always reach max_tokens_per_seq; refuse a cache that
  // cannot fit in memory before compiling anything.
  KvCacheLayout one_block;
  one_block.num_layers = config.num_layers;
  one_block.num_blocks = 1;
  one_block.block_size = o.block_size;
  one_block.num_kv_heads = config.num_kv_heads;
  one_block.head_dim = config.head_dim;
  one_block.dtype = o.kv_dtype;
  const int64_t blocks_per_seq = (int64_t{o.max_tokens_per_seq} + o.block_size - 1) / o.block_size;
  const int64_t num_blocks = blocks_per_seq * o.max_seqs;
  const double bytes = static_cast<double>(num_blocks) * static_cast<double>(one_block.BlockBytes());
  const int64_t available = AvailableMemoryBytes();
  if (num_blocks > std::numeric_limits<int32_t>::max() ||
      (available > 0 && bytes > static_cast<double>(available))) {
    return ResourceExhausted(
        "a KV cache for {} sequences of {} tokens needs {:.0f} bytes, more than the {} bytes available; "
        "lower max_seqs or max_tokens_per_seq",
        o.max_seqs, o.max_tokens_per_seq, bytes, available);
  }

  auto session = std::unique_ptr<ForwardSession>(new ForwardSession(std::move(model), o));
  CompileOptions co;
  co.backend = o.backend;
  co.precision = o.precision;
  co.fuse.precision = o.precision;
  co.max_batch_tokens = o.max_batch_tokens;
  co.max_model_len = o.max_tokens_per_seq;
  co.max_seqs = o.max_seqs;
  co.block_size = o.block_size;
  co.kv_dtype = o.kv_dtype;
  co.threads = o.threads;
  KILN_ASSIGN_OR_RETURN(session->compiled_, CompiledModel::Compile(*session->model_.weights, co));
  KILN_ASSIGN_OR_RETURN(session->kv_,
                        KvCache::Allocate(session->compiled_->MakeKvLayout(num_blocks), HostMemory()));
  session->blocks_ =
      std::make_unique<KvBlockPool>(static_cast<int32_t>(num_blocks), o.block_size, o.max_seqs);
  session->vocab_size_ = static_cast<int32_t>(config.vocab_size);
  return session;
}

Status ForwardSession::CheckSeq(int32_t seq) const {
  if (seq < 0 || seq >= options_.max_seqs) {
    return InvalidArgument("sequence id {} outside [0, {})", seq, options_.max_seqs);
  }
  return Status::Ok();
}

Expected<int64_t> ForwardSession::Run(const SessionBatch& batch, float* logits, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = batch.token_ids.size();
  if (n == 0) return InvalidArgument("no tokens to run");
  const size_t max_tokens =
      static_cast<size_t>(options_.max_seqs) * static_cast<size_t>(options_.max_tokens_per_seq);
  if (n > max_tokens) {
    return OutOfRange("{} tokens, more than the session's {} sequences of {} tokens hold", n,
                      options_.max_seqs, options_.max_tokens_per_seq);
  }

  // Each token's position: the next one of its sequence.
  std::vector<int32_t> next(static_cast<size_t>(options_.max_seqs), -1);
  std::vector<int32_t> last_token(static_cast<size_t>(options_.max_seqs), -1);
  std::vector<int32_t> touched;  // sequences in order of first appearance
  std::vector<int32_t> positions(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t seq = batch.seq_ids != nullptr ? batch.seq_ids[i] : 0;
    if (seq < 0 || seq >= options_.max_seqs) {
      return InvalidArgument("token {}: sequence id {} outside [0, {})", i, seq, options_.max_seqs);
    }
    const int32_t id = batch.token_ids[i];
    if (id < 0 || id >= vocab_size_) {
      return OutOfRange("token {}: id {} outside the vocabulary of {}", i, id, vocab_size_);
    }
    int32_t& expected = next[static_cast<size_t>(seq)];
    if (expected < 0) {
      expected = blocks_->length(seq);
      touched.push_back(seq);
    }
    if (batch.positions != nullptr && batch.positions[i] != expected) {
      return InvalidArgument(
          "token {}: position {} in sequence {}, expected {}: a sequence continues at its length (truncate "
          "it "
          "to go back)",
          i, batch.positions[i], seq, expected);
    }
    if (expected >= options_.max_tokens_per_seq) {
      return OutOfRange("token {}: sequence {} would grow beyond the session's {} tokens per sequence", i,
                        seq, options_.max_tokens_per_seq);
    }
    positions[i] = expected++;
    last_token[static_cast<size_t>(seq)] = static_cast<int32_t>(i);
  }

  std::vector<bool> wants_row(n, batch.mode == LogitsMode::kAll);
  if (batch.mode == LogitsMode::kLast) {
    for (int32_t seq : touched) wants_row[static_cast<size_t>(last_token[static_cast<size_t>(seq)])] = true;
  }
  const int64_t rows = std::count(wants_row.begin(), wants_row.end(), true);
  if (rows > 0) {
    const size_t needed = static_cast<size_t>(rows) * static_cast<size_t>(vocab_size_);
    if (logits == nullptr)
      return InvalidArgument("logits is NULL; {} rows of {} floats are due", rows, vocab_size_);
    if (capacity < needed) {
      return OutOfRange("logits buffer holds {} floats; {} rows of {} need {}", capacity, rows, vocab_size_,
                        needed);
    }
  }

  // Blocks for every sequence's new length, given back if anything fails.
  std::vector<int32_t> old_lengths;
  auto roll_back = [&] {
    for (size_t k = 0; k < old_lengths.size(); ++k) blocks_->Truncate(touched[k], old_lengths[k]);
  };
  for (int32_t seq : touched) {
    const int32_t old_length = blocks_->length(seq);
    if (!blocks_->Grow(seq, next[static_cast<size_t>(seq)])) {
      roll_back();
      return ResourceExhausted("sequence {}: no free KV cache block", seq);
    }
    old_lengths.push_back(old_length);
  }

  float* out = logits;
  const size_t chunk = static_cast<size_t>(options_.max_batch_tokens);
  for (size_t begin = 0; begin < n; begin += chunk) {
    const size_t end = std::min(n, begin + chunk);
    Status s =
        RunChunk(batch, positions, static_cast<int32_t>(begin), static_cast<int32_t>(end), wants_row, out);
    if (!s.ok()) {
      roll_back();
      return s;
    }
    const auto chunk_rows = std::count(wants_row.begin() + static_cast<std::ptrdiff_t>(begin),
                                       wants_row.begin() + static_cast<std::ptrdiff_t>(end), true);
    if (chunk_rows > 0) out += static_cast<size_t>(chunk_rows) * static_cast<size_t>(vocab_size_);
  }
  return rows;
}

Status ForwardSession::RunChunk(const SessionBatch& batch, const std::vector<int32_t>& positions,
                                int32_t begin, int32_t end, const std::vector<bool>& wants_row,
                                float* logits) {
  // The pass wants each sequence's tokens together: count them per
  // sequence (in order of first appearance), then place each token.
  const int32_t n = end - begin;
  auto seq_of = [&](int32_t i) { return batch.seq_ids != nullptr ? batch.seq_ids[i] : 0; };
  std::vector<int32_t> local(static_cast<size_t>(options_.max_seqs), -1);
  order_.clear();
  query_start_.assign(1, 0);
  for (int32_t i = begin; i < end; ++i) {
    int32_t& l = local[static_cast<size_t>(seq_of(i))];
    if (l < 0) {
      l = static_cast<int32_t>(order_.size());
      order_.push_back(seq_of(i));
      query_start_.push_back(0);
    }
    ++query_start_[static_cast<size_t>(l) + 1];
  }
  const size_t num_seqs = order_.size();
  for (size_t s = 0; s < num_seqs; ++s) query_start_[s + 1] += query_start_[s];

  token_ids_.resize(static_cast<size_t>(n));
  positions_.resize(static_cast<size_t>(n));
  token_seq_.resize(static_cast<size_t>(n));
  seq_lens_.assign(num_seqs, 0);
  block_tables_.resize(num_seqs);
  output_rows_.clear();
  std::vector<int32_t> cursor(query_start_.begin(), query_start_.end() - 1);
  for (int32_t i = begin; i < end; ++i) {
    const int32_t l = local[static_cast<size_t>(seq_of(i))];
    const int32_t g = cursor[static_cast<size_t>(l)]++;
    token_ids_[static_cast<size_t>(g)] = batch.token_ids[static_cast<size_t>(i)];
    positions_[static_cast<size_t>(g)] = positions[static_cast<size_t>(i)];
    token_seq_[static_cast<size_t>(g)] = l;
    seq_lens_[static_cast<size_t>(l)] = positions[static_cast<size_t>(i)] + 1;
    if (wants_row[static_cast<size_t>(i)]) output_rows_.push_back(g);
  }
  for (size_t s = 0; s < num_seqs; ++s) block_tables_[s] = blocks_->block_table(order_[s]).data();

  ForwardBatch fb;
  fb.num_tokens = n;
  fb.token_ids = token_ids_.data();
  fb.positions = positions_.data();
  fb.token_seq = token_seq_.data();
  fb.num_seqs = static_cast<int32_t>(num_seqs);
  fb.query_start = query_start_.data();
  fb.seq_lens = seq_lens_.data();
  fb.block_tables = block_tables_.data();
  fb.num_output_rows = static_cast<int32_t>(output_rows_.size());
  fb.output_rows = output_rows_.data();
  return compiled_->Forward(fb, *kv_, logits, vocab_size_);
}

Status ForwardSession::Reset(int32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq == -1) {
    for (int32_t s = 0; s < options_.max_seqs; ++s) blocks_->Truncate(s, 0);
    return Status::Ok();
  }
  KILN_RETURN_IF_ERROR(CheckSeq(seq));
  blocks_->Truncate(seq, 0);
  return Status::Ok();
}

Status ForwardSession::Truncate(int32_t seq, int32_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_RETURN_IF_ERROR(CheckSeq(seq));
  if (length < 0 || length > blocks_->length(seq)) {
    return OutOfRange("sequence {}: length {} outside [0, {}] (its current length)", seq, length,
                      blocks_->length(seq));
  }
  blocks_->Truncate(seq, length);
  return Status::Ok();
}

Expected<int32_t> ForwardSession::Length(int32_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_RETURN_IF_ERROR(CheckSeq(seq));
  return blocks_->length(seq);
}

}  // namespace kiln::capi
