// Adaptive draft length: how many tokens one sequence should draft this
// step, from how often its recent drafts were accepted. A draft token is
// worth verifying when the chance that it is accepted (that every draft
// token before it was, and it too) exceeds what its row adds to the cost
// of the pass; a sequence whose drafts are almost never right stops
// drafting for a while and probes again later, so that free text costs
// nothing where prompt lookup finds nothing useful.
#pragma once

#include <cstdint>

namespace kiln {

struct DraftLengthConfig {
  int32_t max_tokens = 4;  // the draft length when acceptance is high (--spec-tokens)
  // The k-th draft token is drafted while acceptance^k is at least this:
  // the cost of one more verified row as a share of a pass.
  double min_gain = 0.25;
  // Weight of the newest verification in the moving averages.
  double smoothing = 0.3;
  // Decode steps without drafting after acceptance fell below min_gain,
  // doubled after each probe that finds it still low, up to the maximum.
  int32_t pause_steps = 8;
  int32_t max_pause_steps = 128;
};

// One sequence's controller. The acceptance is estimated per draft
// position tried: a verification that accepted a of k tokens tried a + 1
// positions (or k when all were accepted) and succeeded at a; successes
// and tries are exponential moving averages, starting optimistic (one
// try, one success) so that a new sequence drafts in full.
class DraftLength {
 public:
  // The draft length for this decode step: 0 while paused (each call
  // counts one step of the pause), else between 1 and max_tokens.
  int32_t Next(const DraftLengthConfig& config);
  // A verification of `drafted` tokens (>= 1) of which `accepted` were.
  void Record(const DraftLengthConfig& config, int32_t drafted, int32_t accepted);
  // The estimated chance that a draft token is accepted when those before
  // it were.
  double acceptance() const { return tries_ > 0 ? successes_ / tries_ : 0; }
  bool paused() const { return pause_left_ > 0; }

 private:
  double successes_ = 1;
  double tries_ = 1;
  int32_t pause_left_ = 0;
  int32_t next_pause_ = 0;  // 0: config.pause_steps
};

// The longest k in [0, max_tokens] with acceptance^k >= min_gain (k = 0
// when even one draft token is not worth it).
int32_t DraftLengthFor(double acceptance, const DraftLengthConfig& config);

}  // namespace kiln
