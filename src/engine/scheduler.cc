// The scheduler's step: running first, then waiting, preempting when blocks run out.
#include "engine/scheduler.h"

#include <algorithm>
#include <cassert>

namespace kiln {

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager& blocks, BlockManager* window_blocks)
    : config_(config), blocks_(blocks), window_blocks_(window_blocks) {
  assert(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0 && config.max_prefill_chunk >= 0);
}

void Scheduler::Add(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_back(seq);
}

bool Scheduler::Reserve(Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix,
                        const CachedPrefix& window_prefix) {
  if (window_blocks_ == nullptr) return blocks_.AllocateSlots(seq, num_new_tokens, prefix);
  if (!blocks_.CanAllocate(seq, num_new_tokens, prefix) ||
      !window_blocks_->CanAllocate(seq, num_new_tokens, window_prefix)) {
    return false;
  }
  const bool full_ok = blocks_.AllocateSlots(seq, num_new_tokens, prefix);
  const bool window_ok = window_blocks_->AllocateSlots(seq, num_new_tokens, window_prefix);
  assert(full_ok && window_ok);
  return full_ok && window_ok;
}

void Scheduler::Computed(Sequence& seq) {
  blocks_.CacheComputedBlocks(seq);
  if (window_blocks_ == nullptr) return;
  window_blocks_->CacheComputedBlocks(seq);
  window_blocks_->ReleaseOutsideWindow(seq);
}

int32_t Scheduler::ChunkSize(int32_t remaining, int32_t budget) const {
  int32_t n = std::min(remaining, budget);
  if (config_.max_prefill_chunk > 0) n = std::min(n, config_.max_prefill_chunk);
  return n;
}

ScheduledBatch Scheduler::Schedule() {
  ScheduledBatch batch;
  int32_t budget = config_.max_num_batched_tokens;
  auto take = [&](Sequence* seq, int32_t n) {
    const int32_t start = seq->num_computed_tokens;
    const bool samples = start + n == seq->num_tokens();
    const auto drafted = static_cast<int32_t>(seq->draft.size());
    batch.seqs.push_back({seq, start, n + drafted, samples, drafted});
    batch.num_tokens += n + drafted;
    budget -= n + drafted;
  };

  // Running sequences, oldest first; the newest give way when blocks run out.
  size_t i = 0;
  for (; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    int32_t n = ChunkSize(seq->num_uncomputed_tokens(), budget);
    assert(n > 0);
    // A draft rides along only when the pass reaches the last token, within
    // what the budget leaves after one token for each running sequence
    // behind this one, and in blocks that are free now.
    const auto behind = static_cast<int32_t>(running_.size() - i - 1);
    int32_t drafted = n == seq->num_uncomputed_tokens() ? std::max(0, budget - n - behind) : 0;
    drafted = std::min(drafted, static_cast<int32_t>(seq->draft.size()));
    if (drafted > 0 && !Reserve(*seq, n + drafted)) drafted = 0;
    seq->TrimDraft(static_cast<size_t>(drafted));
    bool preempted_self = false;
    while (drafted == 0 && !Reserve(*seq, n)) {
      Sequence* victim = running_.back();
      running_.pop_back();
      Preempt(victim);
      batch.preempted.push_back(victim);
      if (victim == seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    take(seq, n);
    ++i;
  }
  // Sequences the budget did not reach run nothing, drafts included.
  for (; i < running_.size(); ++i) running_[i]->TrimDraft(0);

  // Waiting sequences, in order, unless this step already ran short of blocks.
  while (batch.preempted.empty() && !waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    CachedPrefix prefix = blocks_.FindCachedPrefix(*seq);
    // The window pool may serve a shorter hit than the full pool.
    const CachedPrefix window_prefix =
        window_blocks_ != nullptr ? window_blocks_->FindWindowPrefix(*seq, prefix) : CachedPrefix{};
    int32_t n = ChunkSize(seq->num_tokens() - prefix.num_tokens, budget);
    if (!Reserve(*seq, n, prefix, window_prefix)) break;
    waiting_.pop_front();
    // A request's cached tokens are those found at its first admission, not
    // the blocks it finds again when recomputed after a preemption.
    if (seq->stats.num_preemptions == 0) seq->stats.cached_tokens = prefix.num_tokens;
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    seq->TrimDraft(0);  // admission runs (part of) the prompt, never a draft
    take(seq, n);
  }
  return batch;
}

void Scheduler::OnBatchComputed(const ScheduledBatch& batch) {
  for (const ScheduledSequence& s : batch.seqs) {
    assert(s.seq->num_computed_tokens == s.start);
    s.seq->num_computed_tokens += s.num_tokens - s.num_draft_tokens;
    Computed(*s.seq);
  }
}

void Scheduler::OnDraftVerified(Sequence* seq, int32_t num_accepted) {
  assert(num_accepted >= 0 && num_accepted <= static_cast<int32_t>(seq->draft.size()));
  seq->num_computed_tokens += num_accepted;
  assert(seq->num_computed_tokens < seq->num_tokens());
  blocks_.TruncateSlots(*seq, seq->num_computed_tokens);
  if (window_blocks_ != nullptr) window_blocks_->TruncateSlots(*seq, seq->num_computed_tokens);
  Computed(*seq);
  seq->TrimDraft(0);
}

void Scheduler::Finish(Sequence* seq) {
  auto drop = [seq](std::deque<Sequence*>& queue) {
    auto it = std::find(queue.begin(), queue.end(), seq);
    if (it != queue.end()) queue.erase(it);
  };
  drop(running_);
  drop(waiting_);
  blocks_.Free(*seq);
  if (window_blocks_ != nullptr) window_blocks_->Free(*seq);
  seq->TrimDraft(0);
  seq->status = SequenceStatus::kFinished;
}

void Scheduler::Preempt(Sequence* seq) {
  blocks_.Free(*seq);
  if (window_blocks_ != nullptr) window_blocks_->Free(*seq);
  seq->TrimDraft(0);
  seq->num_computed_tokens = 0;
  seq->status = SequenceStatus::kWaiting;
  seq->stats.num_preemptions += 1;
  ++num_preemptions_;
  waiting_.push_front(seq);
}

}  // namespace kiln
