// The C API's sessions: a model session (the compiled model and its KV
// cache) driven by the caller's own decoding loop, with a fixed number of
// sequence ids, forward passes that append tokens to them and write logits
// into the caller's buffer, and rewinding.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "capi/kv_block_pool.h"
#include "core/precision.h"
#include "core/dtype.h"
#include "core/status.h"
#include "engine/model_loader.h"
#include "engine/model_session_options.h"

namespace kiln {
class ModelSession;
}  // namespace kiln

namespace kiln::capi {

enum class LogitsMode { kLast, kAll, kNone };

// What one forward pass is given; see ForwardSession::Run.
struct SessionBatch {
  std::span<const int32_t> token_ids;
  const int32_t* positions = nullptr;  // null: each sequence's next positions
  const int32_t* seq_ids = nullptr;    // null: all in sequence 0
  LogitsMode mode = LogitsMode::kLast;
};

class ForwardSession {
 public:
  // Compiles `model` and allocates a KV cache for options.max_seqs
  // sequences of options.kv_tokens_per_seq tokens (0: the model's context,
  // which is also the longest a sequence may grow). Errors name the C
  // API's option.
  static Expected<std::unique_ptr<ForwardSession>> Create(LoadedModel model,
                                                          const ModelSessionOptions& options);

  ~ForwardSession();
  ForwardSession(const ForwardSession&) = delete;
  ForwardSession& operator=(const ForwardSession&) = delete;

  // Runs the batch's tokens, appending each to its sequence, and writes
  // logits rows of vocab_size() floats into `logits` (room for `capacity`
  // floats): kAll, one per token in the order given; kLast, one per
  // sequence, ordered by where each sequence's last token stands in the
  // batch. Returns the number of rows. A sequence's tokens must carry its
  // next positions in order; sequences may interleave. Everything is
  // checked first: an error changes no sequence. Thread-safe (serialized).
  Expected<int64_t> Run(const SessionBatch& batch, float* logits, size_t capacity);

  // Empties sequence `seq`, or every sequence when seq is -1.
  Status Reset(int32_t seq);
  // Keeps the first `length` tokens of sequence `seq`.
  Status Truncate(int32_t seq, int32_t length);
  // Tokens in sequence `seq`'s cache.
  Expected<int32_t> Length(int32_t seq) const;

  int32_t vocab_size() const { return vocab_size_; }
  int32_t max_seqs() const { return max_seqs_; }
  int32_t max_tokens_per_seq() const { return max_tokens_per_seq_; }

 private:
  ForwardSession(LoadedModel model, int32_t max_seqs, int32_t max_tokens_per_seq);
  Status CheckSeq(int32_t seq) const;
  // Runs tokens [begin, end) of the batch (grouped by sequence inside the
  // pass) and writes their output rows from `logits` on.
  Status RunChunk(const SessionBatch& batch, const std::vector<int32_t>& positions, int32_t begin,
                  int32_t end, const std::vector<bool>& wants_row, float* logits);

  LoadedModel model_;
  int32_t max_seqs_ = 0;
  int32_t max_tokens_per_seq_ = 0;
  int32_t vocab_size_ = 0;
  std::unique_ptr<ModelSession> session_;
  std::unique_ptr<KvBlockPool> blocks_;
  mutable std::mutex mu_;
  // Reused between passes.
  std::vector<int32_t> order_, token_ids_, positions_, token_seq_, query_start_, seq_lens_, output_rows_;
  std::vector<const int32_t*> block_tables_;
};

}  // namespace kiln::capi
