// What speculative decoding costs on this machine, measured as it runs, as
// shares of a plain decode pass (one token per sequence, no drafts): the
// time each verified draft row adds to the target's pass, and the time of
// drafting one token (a draft pass, with the proposer's own work around
// it). The draft length (draft_length.h) weighs them against acceptance;
// fixed guesses would be wrong on most machines and for most draft dtypes.
//
// A pass's time depends on how many sequences it carries, so the plain
// pass is timed per batch size (up to kMaxSeqs); the engine runs a decode
// step without drafts whenever the batch size at hand has no plain time
// yet, again soon after (the first decode pass runs cold), and then one
// step in plain_every, so that the shares follow the machine's load. Costs
// are per sequence: a pass over B sequences and R draft rows that took T
// where the plain pass takes P costs each row (T - P) / R against each
// sequence's share P / B.
//
// Other work on the machine only ever lengthens a pass, and a pass of a
// small model takes well under a millisecond, so one preempted pass can
// read several times its cost: the averages follow a sample below them
// quickly and one above them slowly, and the plain pass time takes any
// shorter sample whole (the first decode pass, which times it first, runs
// cold).
#pragma once

#include <array>
#include <cstdint>

namespace kiln {

struct SpecCostConfig {
  // Weight of the newest sample in the moving averages, when it is below
  // the average and when above (the first sample of each is taken whole).
  double smoothing_down = 0.3;
  double smoothing_up = 0.05;
  // After the first plain pass of a batch size, the next one this many
  // decode steps later; then one decode step in plain_every runs without
  // drafts to time a plain pass.
  int32_t second_plain_after = 16;
  int32_t plain_every = 64;
  // The shares before anything is measured: a guess at a row, and drafts
  // taken as free, so that new sequences draft in full until measured.
  double initial_row_cost = 0.25;
  double initial_draft_cost = 0;
};

class SpecCostMeter {
 public:
  // Plain passes are timed for batches of 1..kMaxSeqs sequences; larger
  // batches give no samples (they rarely speculate: spec_max_batch).
  static constexpr int32_t kMaxSeqs = 8;

  explicit SpecCostMeter(const SpecCostConfig& config = {});

  // Whether the coming decode step over `num_seqs` sequences should run
  // without drafts, to time a plain pass. Each call counts a step.
  bool WantsPlainPass(int32_t num_seqs);
  // A decode pass over `num_seqs` sequences and nothing else took
  // `seconds`: without drafts (draft_rows 0) it times the plain pass, with
  // them it gives a sample of the row cost.
  void RecordPass(int32_t num_seqs, int32_t draft_rows, double seconds);
  // Proposing `draft_tokens` tokens for `num_seqs` sequences took
  // `seconds` (without catching a draft model's cache up: that is what
  // resuming costs, not what a draft token costs).
  void RecordDrafting(int32_t num_seqs, int32_t draft_tokens, double seconds);

  // The extra cost of one verified draft row, and of drafting one token,
  // as shares of a sequence's part of a plain decode pass.
  double row_cost() const { return row_cost_; }
  double draft_cost() const { return draft_cost_; }
  // Whether each was measured (else it is the initial guess).
  bool row_measured() const { return row_samples_ > 0; }
  bool draft_measured() const { return draft_samples_ > 0; }
  // Seconds of a plain decode pass over `num_seqs` sequences; 0 when not
  // measured.
  double plain_seconds(int32_t num_seqs) const;

 private:
  // Moves `value` towards `sample`: by `down` of the way when below, by
  // smoothing_up when above.
  void Average(double& value, int64_t& samples, double sample, double down) const;

  SpecCostConfig config_;
  // By batch size - 1.
  std::array<double, kMaxSeqs> plain_{};
  std::array<int64_t, kMaxSeqs> plain_samples_{};
  int32_t steps_since_plain_ = 0;
  double row_cost_ = 0;
  double draft_cost_ = 0;
  int64_t row_samples_ = 0;
  int64_t draft_samples_ = 0;
};

}  // namespace kiln
