// Adaptive draft length: how many tokens one sequence should draft this
// step, from how often its recent drafts were accepted and what drafting
// costs. With acceptance a (the chance that a draft token is accepted when
// those before it were), a draft of k tokens yields 1 + a + ... + a^k
// tokens for a pass that costs 1 + k * (row + draft) plain passes, row the
// extra cost of a verified row and draft that of drafting a token (measured:
// spec_cost_meter.h); the length is the k that yields the most tokens per
// unit of cost. A sequence for which no draft pays stops drafting for a
// while and probes again later, so that free text costs little where the
// drafts are rarely right. Where resuming is itself costly (a draft model
// must first run every token it missed, each at a large share of a decode
// pass, so that a probe costs about what the pause saved) the sequence
// stops drafting for good instead, once it has been verified often enough
// to judge, or at once where the measured costs alone rule out every
// draft.
#pragma once

#include <cstdint>

namespace kiln {

struct DraftLengthConfig {
  int32_t max_tokens = 4;  // the draft length when acceptance is high (--spec-tokens)
  // Costs as shares of a sequence's part of a plain decode pass: what one
  // verified draft row adds to the pass, and drafting one token (0 for prompt
  // lookup). The engine sets them from its measurements; these are the
  // guesses it uses without.
  double row_cost = 0.25;
  double draft_cost = 0;
  // Weight of the newest verification in the moving averages.
  double smoothing = 0.3;
  // Decode steps without drafting after acceptance fell so low that no
  // draft pays,
  // doubled after each probe that finds it still low, up to the maximum.
  int32_t pause_steps = 8;
  int32_t max_pause_steps = 128;
  // Stop for good where a pause would start: for proposers that must catch
  // up before drafting again. Until min_verifications_to_stop
  // verifications were recorded, a sequence drafts one token a step
  // instead (the first estimates rest on a few noisy samples).
  bool stop_instead_of_pause = false;
  int32_t min_verifications_to_stop = 4;
  // The costs were measured well enough that where no draft would pay even
  // if every token were accepted, such a sequence stops without drafting
  // at all (with stop_instead_of_pause).
  bool costs_settled = false;
};

// One sequence's controller. The acceptance is estimated per draft
// position tried: a verification that accepted a of k tokens tried a + 1
// positions (or k when all were accepted) and succeeded at a; successes
// and tries are exponential moving averages, starting optimistic (one
// try, one success) so that a new sequence drafts in full.
class DraftLength {
 public:
  // The draft length for this decode step: 0 while paused (each call
  // counts one step of the pause) or stopped, else between 1 and
  // max_tokens.
  int32_t Next(const DraftLengthConfig& config);
  // A verification of `drafted` tokens (>= 1) of which `accepted` were.
  // True when it stopped the sequence's drafting (the proposer may then
  // release what it keeps for the sequence).
  bool Record(const DraftLengthConfig& config, int32_t drafted, int32_t accepted);
  // The estimated chance that a draft token is accepted when those before
  // it were.
  double acceptance() const { return tries_ > 0 ? successes_ / tries_ : 0; }
  bool paused() const { return pause_left_ > 0; }
  bool stopped() const { return stopped_; }

 private:
  double successes_ = 1;
  double tries_ = 1;
  int32_t pause_left_ = 0;
  int32_t next_pause_ = 0;  // 0: config.pause_steps
  int32_t verifications_ = 0;
  bool stopped_ = false;
};

// The k in [0, max_tokens] that maximizes the expected tokens per unit of
// cost, (1 + a + ... + a^k) / (1 + k * (row_cost + draft_cost)); the
// shortest of equals, and 0 when no draft beats decoding alone.
int32_t DraftLengthFor(double acceptance, const DraftLengthConfig& config);

}  // namespace kiln
