// Speculative decoding's second half: the target model's logits at the
// last token and at each of the k draft tokens after it, all from one pass,
// turned into the tokens the sequence gains (between 1 and k + 1).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace kiln {

// What came with a draft besides its tokens.
struct DraftContext {
  // The proposer's distribution q at each draft position (vocab floats
  // each), or empty: each draft token was proposed with certainty (q is a
  // point mass on it, as for prompt lookup).
  std::span<const std::vector<float>> probs;
  // The grammar mask in force at each of the k + 1 rows (a row's mask
  // assumes the draft tokens before it were accepted), or empty: no
  // grammar. A null entry is no mask.
  std::span<const std::vector<uint32_t>* const> masks;
};

// The tokens the sequence gains from rows of logits for its last token
// and each draft token. Each gained token is recorded in `state` before
// the next row is processed, so that penalties see it as plain decoding
// would. Greedy (temperature 0): the draft tokens equal to the model's
// choice, up to the first that is not, then the model's own token: exactly
// plain decoding's output. Sampling: rejection sampling, so that the
// tokens are distributed exactly as plain decoding's: with p the
// processed distribution at a row (ProcessedDistribution) and q the
// proposer's, draft token x is accepted with probability min(1, p(x) /
// q(x)); a rejection draws from normalize(max(p - q, 0)) and stops; when
// all k are accepted, one more token is drawn from p at row k. A token
// -1 ends the result when a mask allows nothing.
// REQUIRES: `logits` holds draft.size() + 1 rows of `vocab` floats (used as
// scratch); context.probs and context.masks are empty or of draft.size()
// and draft.size() + 1 entries.
std::vector<SampleResult> VerifyDraft(float* logits, int64_t vocab, std::span<const int32_t> draft,
                                      const DraftContext& context, const SamplingParams& params,
                                      SamplerState& state);

}  // namespace kiln
