// Greedy verification: accept draft tokens while the model agrees.
#include "engine/draft_verifier.h"

namespace kiln {

std::vector<SampleResult> VerifyDraft(float* logits, int64_t vocab, std::span<const int32_t> draft,
                                      const SamplingParams& params, SamplerState& state) {
  std::vector<SampleResult> drawn;
  drawn.reserve(draft.size() + 1);
  for (size_t row = 0; row <= draft.size(); ++row) {
    drawn.push_back(Sample(logits + row * static_cast<size_t>(vocab), vocab, params, state));
    AcceptToken(state, drawn.back().token);
    if (row == draft.size() || drawn.back().token != draft[row]) break;
  }
  return drawn;
}

}  // namespace kiln
