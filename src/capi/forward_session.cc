// Forward passes over a session's own KV cache.
#include "capi/forward_session.h"

#include <algorithm>
#include <limits>

#include "backend/forward_batch.h"
#include "engine/model_session.h"
#include "format/weight_store.h"

namespace kiln::capi {
namespace {

// A bound on what a caller may ask for, so that a bad argument is an error
// rather than an enormous allocation. (The batch limit is the compiler's to
// check.)
constexpr int32_t kMaxSeqs = 1 << 16;

}  // namespace

ForwardSession::ForwardSession(LoadedModel model, int32_t max_seqs, int32_t max_tokens_per_seq)
    : model_(std::move(model)), max_seqs_(max_seqs), max_tokens_per_seq_(max_tokens_per_seq) {}

ForwardSession::~ForwardSession() = default;

Expected<std::unique_ptr<ForwardSession>> ForwardSession::Create(LoadedModel model,
                                                                 const ModelSessionOptions& options) {
  if (model.weights == nullptr) return InvalidArgument("session: the model has no weights");
  const ModelConfig& config = model.weights->config();
  ModelSessionOptions o = options;
  if (o.max_seqs < 1 || o.max_seqs > kMaxSeqs) {
    return InvalidArgument("max_seqs must be in [1, {}], got {}", kMaxSeqs, o.max_seqs);
  }
  if (o.kv_tokens_per_seq < 0) {
    return InvalidArgument("max_tokens_per_seq must be >= 0 (0: the model's context), got {}",
                           o.kv_tokens_per_seq);
  }
  const int64_t context =
      std::min<int64_t>(config.max_position_embeddings, std::numeric_limits<int32_t>::max());
  if (o.kv_tokens_per_seq == 0) o.kv_tokens_per_seq = context;
  if (o.kv_tokens_per_seq < 1)
    return InvalidArgument("the model states no context length; give max_tokens_per_seq");
  if (context > 0 && o.kv_tokens_per_seq > context) {
    return OutOfRange("max_tokens_per_seq {} beyond the model's context of {} tokens", o.kv_tokens_per_seq,
                      context);
  }
  // A sequence may grow as long as the cache holds for it.
  o.max_model_len = o.kv_tokens_per_seq;
  if (o.block_size < 1 || o.block_size > 1024) {
    return InvalidArgument("block_size must be in [1, 1024], got {}", o.block_size);
  }
  if (o.threads < 0)
    return InvalidArgument("threads must be >= 0 (0: one per physical core), got {}", o.threads);
  if (o.kv_dtype != DType::kF32 && o.kv_dtype != DType::kF16 && o.kv_dtype != DType::kBF16) {
    return InvalidArgument("KV cache dtype {}: expected f32, f16 or bf16", DTypeName(o.kv_dtype));
  }

  auto session = std::unique_ptr<ForwardSession>(new ForwardSession(
      std::move(model), static_cast<int32_t>(o.max_seqs), static_cast<int32_t>(o.kv_tokens_per_seq)));
  KILN_ASSIGN_OR_RETURN(session->session_, ModelSession::Create(*session->model_.weights, o));
  session->blocks_ = std::make_unique<KvBlockPool>(static_cast<int32_t>(session->session_->num_kv_blocks()),
                                                   static_cast<int32_t>(o.block_size), session->max_seqs_);
  session->vocab_size_ = static_cast<int32_t>(config.vocab_size);
  return session;
}

Status ForwardSession::CheckSeq(int32_t seq) const {
  if (seq < 0 || seq >= max_seqs_) {
    return InvalidArgument("sequence id {} outside [0, {})", seq, max_seqs_);
  }
  return Status::Ok();
}

Expected<int64_t> ForwardSession::Run(const SessionBatch& batch, float* logits, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = batch.token_ids.size();
  if (n == 0) return InvalidArgument("no tokens to run");
  const size_t max_tokens = static_cast<size_t>(max_seqs_) * static_cast<size_t>(max_tokens_per_seq_);
  if (n > max_tokens) {
    return OutOfRange("{} tokens, more than the session's {} sequences of {} tokens hold", n, max_seqs_,
                      max_tokens_per_seq_);
  }

  // Each token's position: the next one of its sequence.
  std::vector<int32_t> next(static_cast<size_t>(max_seqs_), -1);
  std::vector<int32_t> last_token(static_cast<size_t>(max_seqs_), -1);
  std::vector<int32_t> touched;  // sequences in order of first appearance
  std::vector<int32_t> positions(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t seq = batch.seq_ids != nullptr ? batch.seq_ids[i] : 0;
    if (seq < 0 || seq >= max_seqs_) {
      return InvalidArgument("token {}: sequence id {} outside [0, {})", i, seq, max_seqs_);
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
    if (expected >= max_tokens_per_seq_) {
      return OutOfRange("token {}: sequence {} would grow beyond the session's {} tokens per sequence", i,
                        seq, max_tokens_per_seq_);
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
  const size_t chunk = static_cast<size_t>(session_->max_batch_tokens());
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
  std::vector<int32_t> local(static_cast<size_t>(max_seqs_), -1);
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
  return session_->Forward(fb, logits, vocab_size_);
}

Status ForwardSession::Reset(int32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq == -1) {
    for (int32_t s = 0; s < max_seqs_; ++s) blocks_->Truncate(s, 0);
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
