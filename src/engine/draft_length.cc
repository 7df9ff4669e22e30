// Adaptive draft length from a moving average of acceptance and the costs
// of drafting.
#include "engine/draft_length.h"

#include <algorithm>

namespace kiln {

int32_t DraftLengthFor(double acceptance, const DraftLengthConfig& config) {
  const double a = std::clamp(acceptance, 0.0, 1.0);
  const double cost_per_token = std::max(0.0, config.row_cost) + std::max(0.0, config.draft_cost);
  // Decoding alone yields one token for one pass; a longer draft must beat
  // the best so far by more than rounding to be taken.
  int32_t best = 0;
  double best_yield = 1;
  double tokens = 1;
  double accepted_all = 1;  // a^k: every draft token up to the k-th accepted
  for (int32_t k = 1; k <= config.max_tokens; ++k) {
    accepted_all *= a;
    tokens += accepted_all;
    const double yield = tokens / (1 + k * cost_per_token);
    if (yield > best_yield * (1 + 1e-9)) {
      best = k;
      best_yield = yield;
    }
  }
  return best;
}

int32_t DraftLength::Next(const DraftLengthConfig& config) {
  if (stopped_) return 0;
  if (config.stop_instead_of_pause && config.costs_settled && DraftLengthFor(1.0, config) == 0) {
    stopped_ = true;  // no acceptance could pay for these costs
    return 0;
  }
  if (pause_left_ > 0) {
    --pause_left_;
    return 0;
  }
  // A probe after a pause asks for one token even though the estimate is
  // still low: only a verification can lift it.
  return std::max(1, DraftLengthFor(acceptance(), config));
}

bool DraftLength::Record(const DraftLengthConfig& config, int32_t drafted, int32_t accepted) {
  if (drafted <= 0 || stopped_) return false;
  accepted = std::clamp(accepted, 0, drafted);
  const double tried = accepted < drafted ? accepted + 1 : drafted;
  successes_ += config.smoothing * (accepted - successes_);
  tries_ += config.smoothing * (tried - tries_);
  ++verifications_;
  if (DraftLengthFor(acceptance(), config) > 0) {
    next_pause_ = 0;
    return false;
  }
  if (config.stop_instead_of_pause) {
    // Next() asks for one token until there is enough to judge by.
    stopped_ = verifications_ >= config.min_verifications_to_stop;
    return stopped_;
  }
  if (next_pause_ == 0) next_pause_ = config.pause_steps;
  pause_left_ = next_pause_;
  next_pause_ = std::min(config.max_pause_steps, next_pause_ * 2);
  return false;
}

}  // namespace kiln
