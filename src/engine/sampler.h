// Turns one row of logits into the next token under SamplingParams:
// penalties, temperature, top-k, top-p, min-p, then a draw from a seeded
// generator that gives the same tokens for the same seed on every machine.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampling_params.h"

namespace kiln {

// xoshiro256**, seeded through splitmix64: small, fast and fully specified,
// so a seed reproduces across compilers and standard libraries.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t Next();
  // Uniform in [0, 1) with 53 random bits.
  double Uniform();

 private:
  uint64_t s_[4];
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
};

// Per-request sampling state.
struct SamplerState {
  Rng rng;
  std::unordered_map<int32_t, int32_t> output_counts;  // generated token -> count
  std::vector<uint8_t> seen;                           // prompt or output token, by id (repetition penalty)
};

// REQUIRES: params.Validate() is ok.
SamplerState MakeSamplerState(const SamplingParams& params, const std::vector<int32_t>& prompt, int64_t vocab_size,
                              uint64_t fallback_seed);

struct SampleResult {
  int32_t token = -1;
  float logprob = 0;                // of the chosen token under the model's distribution
  std::vector<TokenLogprob> top;    // the top_logprobs most likely tokens
};

// Samples from `logits` (vocab floats; used as scratch and modified).
// Log-probabilities are of the model's raw distribution (before penalties
// and temperature), as OpenAI-compatible servers report them. With
// `allowed` (a grammar's mask: bit id % 32 of word id / 32; ids past its
// end are not allowed), only allowed tokens are drawn; when none is, the
// result's token is -1.
SampleResult Sample(float* logits, int64_t vocab, const SamplingParams& params, SamplerState& state,
                    const std::vector<uint32_t>* allowed = nullptr);

// The distribution Sample draws from, written out: `vocab` probabilities
// summing to 1 after the mask, the penalties (as of `state`), the
// temperature and top-k, top-p and min-p (a point mass at the greedy token
// at temperature 0). The same code as Sample's, so that speculative
// verification compares a draft against exactly what plain decoding would
// draw from. `logits` is used as scratch. False when the mask allows
// nothing.
bool ProcessedDistribution(float* logits, int64_t vocab, const SamplingParams& params,
                           const SamplerState& state, const std::vector<uint32_t>* allowed,
                           std::vector<float>* probs);

// An index drawn with probability proportional to `weights` (those <= 0 or
// NaN never); -1 when no weight is positive.
int32_t DrawFromWeights(std::span<const float> weights, Rng& rng);

// Sets result->logprob (of result->token) and result->top from the raw
// logits as params asks (see Sample); nothing when it asks for none.
void FillLogprobs(const float* raw_logits, int64_t vocab, const SamplingParams& params, SampleResult* result);

// Records a generated token in the state (for penalties).
void AcceptToken(SamplerState& state, int32_t token);

}  // namespace kiln
