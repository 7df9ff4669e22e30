// Verification: greedy agreement, or rejection sampling against q.
#include "engine/draft_verifier.h"

#include <algorithm>
#include <cassert>

namespace kiln {

std::vector<SampleResult> VerifyDraft(float* logits, int64_t vocab, std::span<const int32_t> draft,
                                      const DraftContext& context, const SamplingParams& params,
                                      SamplerState& state) {
  assert(context.probs.empty() || context.probs.size() == draft.size());
  assert(context.masks.empty() || context.masks.size() == draft.size() + 1);
  auto row_logits = [&](size_t row) { return logits + row * static_cast<size_t>(vocab); };
  auto mask = [&](size_t row) { return context.masks.empty() ? nullptr : context.masks[row]; };
  std::vector<SampleResult> drawn;
  drawn.reserve(draft.size() + 1);

  if (params.temperature == 0) {
    // p is a point mass at the model's choice: accept while it agrees.
    for (size_t row = 0; row <= draft.size(); ++row) {
      drawn.push_back(Sample(row_logits(row), vocab, params, state, mask(row)));
      if (drawn.back().token < 0) break;
      AcceptToken(state, drawn.back().token);
      if (row == draft.size() || drawn.back().token != draft[row]) break;
    }
    return drawn;
  }

  const bool want_logprobs = params.logprobs || params.top_logprobs > 0;
  thread_local std::vector<float> p, residual, raw;
  for (size_t row = 0; row < draft.size(); ++row) {
    float* x = row_logits(row);
    if (want_logprobs) raw.assign(x, x + vocab);
    SampleResult result;
    if (!ProcessedDistribution(x, vocab, params, state, mask(row), &p)) {
      if (want_logprobs) FillLogprobs(raw.data(), vocab, params, &result);
      drawn.push_back(std::move(result));  // token -1: nothing allowed
      return drawn;
    }
    const int32_t token = draft[row];
    const bool in_vocab = token >= 0 && token < vocab;
    const float px = in_vocab ? p[static_cast<size_t>(token)] : 0.0f;
    // A proposer's row may be shorter than the vocabulary (a draft model
    // with fewer ids): the ids past it have q = 0.
    const float qx = context.probs.empty() ? 1.0f
                     : in_vocab && static_cast<size_t>(token) < context.probs[row].size()
                         ? context.probs[row][static_cast<size_t>(token)]
                         : 0.0f;
    // Accept with probability min(1, p/q): no draw is needed when p >= q.
    const bool accept = px > 0 && (px >= qx || state.rng.Uniform() * qx < px);
    if (accept) {
      result.token = token;
    } else {
      // The residual normalize(max(p - q, 0)); with a point-mass q, p
      // without the drafted token.
      residual = p;
      if (context.probs.empty()) {
        if (in_vocab) residual[static_cast<size_t>(token)] = 0.0f;
      } else {
        const std::vector<float>& q = context.probs[row];
        const size_t n = std::min(residual.size(), q.size());
        for (size_t i = 0; i < n; ++i) residual[i] = std::max(p[i] - q[i], 0.0f);
      }
      result.token = DrawFromWeights(residual, state.rng);
      // An empty residual (p == q up to rounding): p itself is right.
      if (result.token < 0) result.token = DrawFromWeights(p, state.rng);
    }
    if (want_logprobs) FillLogprobs(raw.data(), vocab, params, &result);
    AcceptToken(state, result.token);
    drawn.push_back(std::move(result));
    if (!accept) return drawn;
  }
  // Every draft token accepted: the bonus token from p at row k.
  drawn.push_back(Sample(row_logits(draft.size()), vocab, params, state, mask(draft.size())));
  if (drawn.back().token >= 0) AcceptToken(state, drawn.back().token);
  return drawn;
}

}  // namespace kiln
