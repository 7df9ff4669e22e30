// The draft-model proposer: a smaller model with the target's tokenizer
// (or the target itself at a cheaper dtype) runs K steps ahead of each
// sequence, all requesting sequences in one batch per step. Its KV cache is
// paged like the target's, with block tables of its own; each sequence's
// draft cache follows the tokens the target accepted: the draft tokens the
// target rejected are dropped by truncating the block table (nothing is
// copied), and the tokens the draft has not seen yet (the target's own
// next token after each verification; the prompt, when Prefill did not
// take it in beside the target's prefill) are run as a prefill before
// drafting. Nothing enters a prefix cache: the draft's block manager keeps
// none.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/block_manager.h"
#include "engine/draft_proposer.h"
#include "engine/engine_options.h"
#include "engine/forward_batch_builder.h"
#include "engine/model_loader.h"
#include "engine/model_session_options.h"

namespace kiln {

class ModelSession;

class DraftModelProposer final : public DraftProposer {
 public:
  // REQUIRES: `draft`'s vocabulary is the target's (CheckSameVocabulary);
  // `session` runs draft.weights. Draft tokens are ids below target_vocab.
  DraftModelProposer(LoadedModel draft, std::unique_ptr<ModelSession> session, int64_t target_vocab);
  ~DraftModelProposer() override;

  // Greedy sequences (temperature 0) get the draft's most likely tokens;
  // others tokens drawn from DraftDistribution under their parameters, each
  // with a generator of its own. A sequence whose draft cache cannot grow,
  // even after the caches of sequences not asking this time are released,
  // gets no draft. A failed draft pass leaves every draft empty (and is
  // logged): speculation is an optimisation, the target decodes regardless.
  void Propose(std::span<const DraftRequest> requests) override;
  // Runs the prompt tokens the target runs this step through the draft
  // too, so that a sequence's first draft needs no prefill of its own.
  // Takes no blocks from other sequences: where the cache is short the
  // first draft catches up instead.
  void Prefill(std::span<const PrefillRequest> requests) override;
  void Forget(RequestId id) override;
  DraftTiming last_timing() const override { return timing_; }
  bool catches_up() const override { return true; }
  Status Prepare(int64_t tokens) override;

  const ModelSession& session() const { return *session_; }
  const BlockManager& blocks() const { return blocks_; }
  // Sequences whose draft cache is held.
  int64_t num_tracked() const { return static_cast<int64_t>(tracked_.size()); }

 private:
  // The draft model's view of one sequence: `mirror.tokens` are the tokens
  // in its KV cache (all computed), `mirror.block_table` where they are.
  struct Tracked;
  // One sequence's part of a draft pass: `tokens` at positions start...
  struct PassEntry {
    Tracked* tracked = nullptr;
    std::span<const int32_t> tokens;
    bool wants_logits = false;  // its last token's logits propose a token
  };

  // A sequence whose draft cache runs its tokens up to `end`; with a
  // request, the logits after them propose its first draft token.
  struct CatchUpWork {
    const DraftRequest* request = nullptr;
    Sequence* seq = nullptr;
    Tracked* tracked = nullptr;
    size_t end = 0;
  };

  // Creates the sequence's entry if needed and marks it asked in this call.
  void MarkAsked(const Sequence& seq);
  // Rolls the sequence's cache back to the longest prefix it shares with
  // seq.tokens (at most keep_limit tokens) and reserves slots for its
  // tokens up to run_until plus extra_slots; null when they do not fit
  // (after releasing idle sequences' caches, when may_release).
  Tracked* Reserve(const Sequence& seq, size_t keep_limit, size_t run_until, int32_t extra_slots,
                   bool may_release);
  // Runs each work item's unseen tokens.
  Status CatchUp(std::span<CatchUpWork> work);
  // Runs one pass; the logits of the entries that want them go to logits_,
  // one row each, in entry order. Its time goes to timing_, as a draft pass
  // or as catching up (DraftTiming).
  Status RunPass(std::span<const PassEntry> entries);
  // Releases the caches of sequences not asked for a draft in this call.
  void ReleaseIdle();
  // Picks the next draft token of `r` from a logits row and records it.
  void ProposeFrom(const float* logits, const DraftRequest& r, Tracked& t);
  Status ProposeAll(std::span<const DraftRequest> requests);

  LoadedModel draft_;
  std::unique_ptr<ModelSession> session_;
  BlockManager blocks_;
  int64_t vocab_ = 0;        // the draft's logits row
  int64_t draft_vocab_ = 0;  // ids it may propose: below both models' vocabularies
  uint64_t call_ = 0;        // Propose calls so far
  std::unordered_map<RequestId, std::unique_ptr<Tracked>> tracked_;
  DraftTiming timing_;  // of the current or last call
  // Reused between passes.
  ForwardBatchBuilder builder_;
  std::vector<float> logits_;
};

// The engine's model session and a draft-model proposer beside it, their
// KV caches carved out of options.kv_cache_memory by SharedKvCacheBlocks
// (each cache gets the same number of blocks). The split is logged.
struct DraftedSessions {
  std::unique_ptr<ModelSession> target;
  std::unique_ptr<DraftModelProposer> proposer;
};
Expected<DraftedSessions> CreateDraftedSessions(const EngineOptions& options, const LoadedModel& target,
                                                const ModelSessionOptions& target_options);

}  // namespace kiln
