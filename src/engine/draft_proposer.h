// Speculative decoding's first half: something that guesses the tokens
// likely to follow a sequence, cheaply, so that the target model can check
// several of them in one forward pass. Proposers differ in where the guess
// comes from (the sequence's own text, a smaller model); the engine treats
// them alike.
#pragma once

#include <cstdint>
#include <span>

#include "engine/sequence.h"

namespace kiln {

// One sequence that wants a draft, and how long the draft may be.
struct DraftRequest {
  Sequence* seq = nullptr;
  int32_t max_tokens = 0;  // >= 1
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
};

}  // namespace kiln
