// Prompt lookup: the sequence's latest n-gram found earlier in the sequence.
#include "engine/ngram_proposer.h"

#include <algorithm>
#include <cassert>

namespace kiln {

std::vector<int32_t> FindNgramDraft(std::span<const int32_t> tokens, const NgramConfig& config,
                                    int32_t max_tokens) {
  assert(config.min_n >= 1 && config.min_n <= config.max_n && max_tokens >= 0);
  std::vector<int32_t> draft;
  const auto length = static_cast<int64_t>(tokens.size());
  if (max_tokens == 0) return draft;
  for (int64_t n = std::min<int64_t>(config.max_n, length - 1); n >= config.min_n; --n) {
    std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(length - n));
    // Matches start at j < length - n (so that at least one token follows);
    // those starting at j <= latest_full have max_tokens followers.
    const int64_t latest_full = length - n - max_tokens;
    int64_t chosen = -1;
    for (int64_t j = length - n - 1; j >= 0; --j) {
      if (tokens[static_cast<size_t>(j + n - 1)] != suffix.back() ||
          !std::equal(suffix.begin(), suffix.end() - 1, tokens.begin() + j)) {
        continue;
      }
      chosen = j;  // the earliest match so far: the most followers
      if (j <= latest_full) break;
    }
    if (chosen < 0) continue;
    const int64_t begin = chosen + n;
    const int64_t end = std::min(length, begin + max_tokens);
    draft.assign(tokens.begin() + begin, tokens.begin() + end);
    return draft;
  }
  return draft;
}

void NgramProposer::Propose(std::span<const DraftRequest> requests) {
  for (const DraftRequest& r : requests) {
    r.seq->draft = FindNgramDraft(r.seq->tokens, config_, r.max_tokens);
    if (r.probs != nullptr) {
      // A lookup guesses each token outright.
      const auto vocab = static_cast<size_t>(r.probs_vocab);
      r.probs->assign(r.seq->draft.size() * vocab, 0.0f);
      for (size_t i = 0; i < r.seq->draft.size(); ++i) {
        (*r.probs)[i * vocab + static_cast<size_t>(r.seq->draft[i])] = 1.0f;
      }
    }
  }
}

}  // namespace kiln
