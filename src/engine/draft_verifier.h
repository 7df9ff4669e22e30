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

// Draws the model's token at each row in order, as decoding one token at a
// time would (the sequence's own sampler, each drawn token recorded in its
// state so that penalties see it), and stops after the first that differs
// from the draft. Returns the draft tokens the model agreed with followed
// by the model's own next token. With greedy sampling this is exactly the
// output of plain decoding; sampling would need rejection sampling here to
// accept more than identical draws (the engine drafts only for greedy
// sequences).
// REQUIRES: `logits` holds draft.size() + 1 rows of `vocab` floats (used as
// scratch).
std::vector<SampleResult> VerifyDraft(float* logits, int64_t vocab, std::span<const int32_t> draft,
                                      const SamplingParams& params, SamplerState& state);

}  // namespace kiln
