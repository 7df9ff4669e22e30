// Continuous batching with one token budget per step: running sequences
// first (a decode token, or the next chunk of a prompt), then waiting ones,
// as far as the budget, the sequence limit and the KV blocks allow. When
// blocks run out the newest running sequences are preempted and later
// recomputed. A sequence whose pass reaches its last token also takes its
// draft (speculative decoding) when the budget and free blocks allow, and
// gives the unverified slots back once the pass has verified them.
// With a window pool beside the full one, a sequence needs blocks in both,
// and its window blocks that fall out of the window are released after
// each pass.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace kiln {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;             // sequences in the running set (and in one pass)
  int32_t max_num_batched_tokens = 512;  // tokens in one pass
  int32_t max_prefill_chunk = 0;         // prompt tokens per sequence per pass; 0: the budget
};

// One sequence's share of a step: positions [start, start + num_tokens) go
// through the model: its tokens from `start` on, then, when the pass
// reaches its last token, the num_draft_tokens tokens of seq->draft.
struct ScheduledSequence {
  Sequence* seq = nullptr;
  int32_t start = 0;  // seq->num_computed_tokens when scheduled
  int32_t num_tokens = 0;  // including the draft
  // The pass reaches the sequence's last token, so the next one is sampled
  // from its logits (and each draft token checked against the model's).
  bool samples = false;
  int32_t num_draft_tokens = 0;  // seq->draft.size(); 0 unless samples
};

struct ScheduledBatch {
  std::vector<ScheduledSequence> seqs;
  int32_t num_tokens = 0;
  std::vector<Sequence*> preempted;  // sent back to waiting during this step

  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  // REQUIRES: config values positive (max_prefill_chunk may be 0) and
  // `blocks` (and `window_blocks`, the window pool or null) outlive the
  // scheduler.
  Scheduler(const SchedulerConfig& config, BlockManager& blocks, BlockManager* window_blocks = nullptr);

  const SchedulerConfig& config() const { return config_; }

  // Queues a new sequence (status waiting, no blocks) behind the others.
  void Add(Sequence* seq);

  // Picks the next pass and reserves its KV slots. Running sequences keep
  // their order; waiting ones are admitted in order while everything fits.
  // A running sequence whose pass reaches its last token takes as much of
  // its draft as the budget allows after one token for each running
  // sequence behind it, and as the free blocks allow without preempting
  // anyone; every other sequence's draft is emptied. Empty when nothing can
  // run.
  ScheduledBatch Schedule();

  // Records that `batch` went through the model: advances each sequence's
  // computed tokens (not past its draft, which is still unverified) and
  // offers newly full blocks to the prefix cache.
  void OnBatchComputed(const ScheduledBatch& batch);

  // Records the verification of a sequence's draft after OnBatchComputed:
  // the first `num_accepted` draft tokens, now appended to seq->tokens
  // with the model's next token after them, count as computed; the slots of
  // the rejected rest are dropped from the block table (their blocks freed
  // where no computed token is left in them; nothing is copied); the draft
  // is emptied.
  // REQUIRES: 0 <= num_accepted <= the draft tokens scheduled, and the
  // tokens appended.
  void OnDraftVerified(Sequence* seq, int32_t num_accepted);

  // Removes a running or waiting sequence for good, freeing its blocks, and
  // marks it finished. The caller sets the finish reason.
  void Finish(Sequence* seq);

  bool HasUnfinished() const { return !waiting_.empty() || !running_.empty(); }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }

 private:
  // Frees the sequence's blocks and puts it at the front of the waiting
  // queue to be recomputed from scratch.
  void Preempt(Sequence* seq);
  // AllocateSlots in both pools, or in neither.
  bool Reserve(Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix = {},
               const CachedPrefix& window_prefix = {});
  // After seq's computed tokens advanced: offers its full blocks to the
  // prefix caches and releases window blocks out of the window.
  void Computed(Sequence& seq);
  // Tokens to schedule for a sequence with `remaining` uncomputed tokens.
  int32_t ChunkSize(int32_t remaining, int32_t budget) const;

  SchedulerConfig config_;
  BlockManager& blocks_;
  BlockManager* window_blocks_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;  // oldest admission first
  int64_t num_preemptions_ = 0;
};

}  // namespace kiln
