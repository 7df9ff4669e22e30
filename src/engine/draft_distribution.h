// The distribution a draft model's token is drawn from (rejection
// sampling's q): the draft's logits under the sequence's temperature,
// top-k, top-p and min-p. Penalties are left out: the target corrects any
// q exactly, so q needs only to be the distribution the draft token really
// came from, and penalties would cost a pass over the sequence per token.
#pragma once

#include <cstdint>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace kiln {

// Writes the distribution over ids [0, vocab) to `q` (vocab floats, summing
// to 1). Greedy parameters (temperature 0) give 1 at the lowest id among
// the largest logits. Logits are not modified; NaNs count as -inf.
// REQUIRES: vocab >= 1.
void DraftDistribution(const float* logits, int64_t vocab, const SamplingParams& params, float* q);

// Draws an id from `q` (vocab floats summing to 1) with one uniform number.
int32_t DrawFromDistribution(const float* q, int64_t vocab, Rng& rng);

}  // namespace kiln
