// Turns a scheduled batch into one forward pass of the compiled model over
// the paged KV cache, then samples the next token of each sequence whose
// pass reached its last token, and verifies the drafts that came with it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "engine/forward_batch_builder.h"
#include "engine/mask_worker.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace kiln {

class ModelSession;
class TensorDumper;

class ModelRunner {
 public:
  // REQUIRES: `session` outlives the runner.
  explicit ModelRunner(ModelSession& session);

  // Runs every scheduled sequence's tokens in one ModelSession::Forward
  // call (positions, block tables and the rows whose logits are needed are
  // runtime inputs) and returns the tokens drawn for each batch.seqs entry,
  // in order: none where the sequence does not sample; else, for a
  // sequence with k draft tokens, the logits of its last token and of each
  // draft token are read and VerifyDraft's 1 to k + 1 tokens returned (one
  // token without a draft). Each drawn token is recorded in the sequence's
  // sampler state. With a sequence with an active OutputConstraint, only
  // the tokens its grammar allows are drawn, at every row (the masks are
  // computed on a thread of its own while the forward pass runs, each draft
  // row's with the grammar advanced through the draft before it and then
  // rolled back; the draft must be one the grammar allows; token -1 when
  // nothing is allowed). With a `dumper`, the pass's named
  // intermediate values and its logits (as "logits") are written out. With
  // `on_kv_layer_written`, the pass calls it once per layer, in layer
  // order, as each layer's keys and values are written (ForwardBatch). An
  // error leaves sequences and sampler states untouched.
  Expected<std::vector<std::vector<SampleResult>>> Run(const ScheduledBatch& batch,
                                                       TensorDumper* dumper = nullptr,
                                                       KvLayerCallback on_kv_layer_written = {});

 private:
  ModelSession& session_;
  int64_t vocab_size_;
  // Reused between passes so that a step allocates little.
  ForwardBatchBuilder builder_;
  std::vector<float> logits_;
  // The batch.seqs entries that sample, in logits row order, each with its
  // first logits row (one row, or one more than its draft tokens).
  struct SamplingSeq {
    size_t entry = 0;
    int32_t first_row = 0;
  };
  std::vector<SamplingSeq> sampling_;
  // Grammar masks by logits row, and for each row its mask or null where
  // unconstrained.
  std::vector<std::vector<uint32_t>> masks_;
  std::vector<const std::vector<uint32_t>*> row_masks_;
  MaskWorker mask_worker_;
};

}  // namespace kiln
