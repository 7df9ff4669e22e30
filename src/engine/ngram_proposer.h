// Prompt lookup: the n-gram proposer. Output that quotes its input (code
// edits, summaries, extraction, retrieval answers) repeats long runs of the
// prompt; when the sequence's last n tokens occurred earlier, the tokens
// that followed them then are a good guess for what follows now. Costs no
// model and no memory beyond the tokens themselves.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/draft_proposer.h"

namespace kiln {

struct NgramConfig {
  int32_t min_n = 2;  // the shortest suffix worth matching
  int32_t max_n = 4;  // the longest suffix tried (first)
};

// The draft for `tokens`: for n from config.max_n down to config.min_n, the
// last n tokens are looked for earlier in `tokens`; the first n with a match
// decides. Of its matches the most recent one followed by at least
// max_tokens tokens is taken (recent text predicts best), else the one
// followed by the most; up to max_tokens of its followers are the draft.
// Empty when no suffix of those lengths occurred before.
// REQUIRES: 1 <= config.min_n <= config.max_n, max_tokens >= 0.
std::vector<int32_t> FindNgramDraft(std::span<const int32_t> tokens, const NgramConfig& config,
                                    int32_t max_tokens);

class NgramProposer final : public DraftProposer {
 public:
  explicit NgramProposer(const NgramConfig& config) : config_(config) {}

  void Propose(std::span<const DraftRequest> requests) override;

 private:
  NgramConfig config_;
};

}  // namespace kiln
