// Speculative decoding's first half: something that guesses the tokens
// likely to follow a sequence, cheaply, so that the target model can check
// several of them in one forward pass. Proposers differ in where the guess
// comes from (the sequence's own text, a smaller model); the engine treats
// them alike.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/sequence.h"

namespace kiln {

// One sequence that wants a draft, and how long the draft may be.
struct DraftRequest {
  Sequence* seq = nullptr;
  int32_t max_tokens = 0;  // >= 1
};

// A sequence whose first num_tokens tokens the target runs this step.
struct PrefillRequest {
  Sequence* seq = nullptr;
  int32_t num_tokens = 0;
};

// The model passes of a proposer's last Propose or Prefill call, for the
// engine's cost meter. A draft pass proposes one token for each sequence
// in it and runs at most the few tokens the steady state needs (the
// target's own next token, and the last draft token when all were
// accepted); a catch-up pass runs more (a prompt not taken in beside the
// target's prefill, the tokens decoded while drafting paused). Catching up
// is what it costs to resume drafting, not what a draft token costs: the
// engine's cost meter leaves it out, and with it the draft tokens that
// catch-up passes proposed on the way (they cost next to nothing beyond
// the catching up).
struct DraftTiming {
  int32_t draft_passes = 0;
  double draft_seconds = 0;
  int64_t catch_up_tokens = 0;
  double catch_up_seconds = 0;
  int32_t catch_up_drafts = 0;
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;

  // Sets each request's seq->draft to at most max_tokens tokens guessed to
  // follow seq->tokens (possibly none), and seq->draft_probs to the
  // distribution each was drawn from (one vocabulary-sized row per draft
  // token, after the request's sampling parameters as the target's are
  // applied), or leaves it empty when each token was proposed with
  // certainty (prompt lookup); sampled requests' rejection sampling needs
  // it to accept exactly the target's distribution. All of a step's
  // requests come in one call, so that a proposer that runs a model can
  // batch them.
  virtual void Propose(std::span<const DraftRequest> requests) = 0;

  // The sequences' prompts go through the target in this step (up to
  // num_tokens each): a proposer that keeps state per sequence may take
  // them in now, so that the first draft costs no prefill of its own.
  virtual void Prefill(std::span<const PrefillRequest> /*requests*/) {}

  // The sequence finished or was preempted: whatever the proposer keeps
  // for it (a draft model's KV cache) is released. A later Propose for the
  // same id starts over.
  virtual void Forget(RequestId /*id*/) {}

  // What the last Propose or Prefill call ran; nothing for proposers that
  // run no model (prompt lookup).
  virtual DraftTiming last_timing() const { return {}; }

  // Readies whatever the proposer runs for passes of up to `tokens` tokens
  // (a draft model binds its programs of those sizes), at start rather
  // than in the middle of decoding.
  virtual Status Prepare(int64_t /*tokens*/) { return Status::Ok(); }

  // Whether drafting for a sequence that skipped steps first runs the
  // tokens it missed (a draft model's cache falls behind; prompt lookup
  // has nothing to catch up).
  virtual bool catches_up() const { return false; }
};

}  // namespace kiln
