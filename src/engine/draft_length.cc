// Adaptive draft length from a moving average of acceptance.
#include "engine/draft_length.h"

#include <algorithm>
#include <cmath>

namespace kiln {

int32_t DraftLengthFor(double acceptance, const DraftLengthConfig& config) {
  if (acceptance < config.min_gain || config.max_tokens <= 0) return 0;
  if (acceptance >= 1 || config.min_gain <= 0) return config.max_tokens;
  // acceptance^k >= min_gain  <=>  k <= log(min_gain) / log(acceptance).
  const double longest = std::floor(std::log(config.min_gain) / std::log(acceptance) + 1e-9);
  return static_cast<int32_t>(std::clamp<double>(longest, 1, config.max_tokens));
}

int32_t DraftLength::Next(const DraftLengthConfig& config) {
  if (pause_left_ > 0) {
    --pause_left_;
    return 0;
  }
  // A probe after a pause asks for one token even though the estimate is
  // still low: only a verification can lift it.
  return std::max(1, DraftLengthFor(acceptance(), config));
}

void DraftLength::Record(const DraftLengthConfig& config, int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  accepted = std::clamp(accepted, 0, drafted);
  const double tried = accepted < drafted ? accepted + 1 : drafted;
  successes_ += config.smoothing * (accepted - successes_);
  tries_ += config.smoothing * (tried - tries_);
  if (acceptance() >= config.min_gain) {
    next_pause_ = 0;
    return;
  }
  if (next_pause_ == 0) next_pause_ = config.pause_steps;
  pause_left_ = next_pause_;
  next_pause_ = std::min(config.max_pause_steps, next_pause_ * 2);
}

}  // namespace kiln
