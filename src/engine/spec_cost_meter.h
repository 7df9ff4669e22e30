// What speculative decoding costs on this machine, measured as it runs, as
// shares of a plain decode pass (one token per sequence, no drafts): the
// time each verified draft row adds to the target's pass, and the time of
// drafting one token (a draft pass, with the proposer's own work around
// it). The draft length (draft_length.h) weighs them against acceptance;
// fixed guesses would be wrong on most machines and for most draft dtypes.
//
// A pass's time depends on how many sequences it carries, so the plain
// pass is timed per batch size (up to kMaxSeqs). It is timed only after
// another plain pass over as many sequences: a pass right after drafting
// (or after a prefill) runs slower, its weights pushed out of cache and
// the workers gone to sleep, and that slowness is a cost of speculating,
// which the plain time must not absorb. So the engine runs plain_run
// decode steps in a row without drafts whenever the batch size at hand has
// no plain time yet, again soon after, and then every plain_every steps,
// so that the shares follow the machine's load; steps whose sequences
// draft nothing (paused) time it too. Costs are per sequence: a pass over
// B sequences and R draft rows that took T where the plain pass takes P
// costs each row (T - P) / R against each sequence's share P / B.
//
// Each figure is the median of its recent samples: other work on the
// machine lengthens a pass now and then (a small model's pass takes well
// under a millisecond, so one preempted pass can read several times its
// cost), the first decode pass runs cold, and the costs vary from step to
// step for real (the first pass after drafting finds the target's weights
// pushed out of cache); a median ignores the outliers on either side
// without leaning towards them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace kiln {

struct SpecCostConfig {
  // How many recent samples each median covers: of the plain pass per
  // batch size, and of each cost.
  int32_t plain_window = 5;
  int32_t cost_window = 15;
  // Decode steps without drafts in a row when a plain pass is to be timed
  // (all but the first give a sample).
  int32_t plain_run = 3;
  // After the first samples of a batch size, the next run this many decode
  // steps later; then a run every plain_every steps.
  int32_t second_plain_after = 16;
  int32_t plain_every = 64;
  // The shares before anything is measured: a guess at a row, and drafts
  // taken as free, so that new sequences draft in full until measured.
  double initial_row_cost = 0.25;
  double initial_draft_cost = 0;
};

// The median of the last `capacity` samples (the lower middle one of an
// even count, which after a cold first sample is the warm one).
class RecentMedian {
 public:
  explicit RecentMedian(int32_t capacity = 1);
  void Add(double sample);
  double value() const { return value_; }
  int64_t samples() const { return samples_; }

 private:
  std::vector<double> ring_;
  std::vector<double> sorted_;  // scratch for the median, as large as ring_
  size_t next_ = 0;
  int64_t samples_ = 0;
  double value_ = 0;
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
  // A pass that is neither (a prefill ran in it): the plain pass after it
  // runs cold.
  void RecordOtherPass();
  // Proposing `draft_tokens` tokens for `num_seqs` sequences took
  // `seconds` (without catching a draft model's cache up: that is what
  // resuming costs, not what a draft token costs).
  void RecordDrafting(int32_t num_seqs, int32_t draft_tokens, double seconds);

  // The extra cost of one verified draft row, and of drafting one token,
  // as shares of a sequence's part of a plain decode pass.
  double row_cost() const { return row_measured() ? row_cost_.value() : config_.initial_row_cost; }
  double draft_cost() const { return draft_measured() ? draft_cost_.value() : config_.initial_draft_cost; }
  // Whether each was measured (else it is the initial guess).
  bool row_measured() const { return row_cost_.samples() > 0; }
  bool draft_measured() const { return draft_cost_.samples() > 0; }
  // Whether both rest on enough samples for their medians to outvote one
  // slow pass.
  bool settled() const { return row_cost_.samples() >= 3 && draft_cost_.samples() >= 3; }
  // Seconds of a plain decode pass over `num_seqs` sequences; 0 when not
  // measured.
  double plain_seconds(int32_t num_seqs) const;

 private:
  SpecCostConfig config_;
  // By batch size - 1.
  std::array<RecentMedian, kMaxSeqs> plain_;
  int32_t steps_since_plain_ = 0;
  int32_t plain_run_left_ = 0;
  // The batch size of the last pass if it was plain, else 0.
  int32_t last_plain_seqs_ = 0;
  RecentMedian row_cost_;
  RecentMedian draft_cost_;
};

}  // namespace kiln
