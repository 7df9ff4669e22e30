// Speculative decoding's measured costs.
#include "engine/spec_cost_meter.h"

#include <algorithm>

namespace kiln {

namespace {

// A share past this many plain passes is a pass that waited for the
// machine, not a cost.
constexpr double kMaxShare = 4;

}  // namespace

RecentMedian::RecentMedian(int32_t capacity)
    : ring_(static_cast<size_t>(std::max(capacity, 1))), sorted_(ring_.size()) {}

void RecentMedian::Add(double sample) {
  ring_[next_] = sample;
  next_ = (next_ + 1) % ring_.size();
  ++samples_;
  const auto count =
      static_cast<std::ptrdiff_t>(std::min<int64_t>(samples_, static_cast<int64_t>(ring_.size())));
  std::copy(ring_.begin(), ring_.begin() + count, sorted_.begin());
  const auto middle = sorted_.begin() + (count - 1) / 2;
  std::nth_element(sorted_.begin(), middle, sorted_.begin() + count);
  value_ = *middle;
}

SpecCostMeter::SpecCostMeter(const SpecCostConfig& config)
    : config_(config), row_cost_(config.cost_window), draft_cost_(config.cost_window) {
  plain_.fill(RecentMedian(config.plain_window));
}

double SpecCostMeter::plain_seconds(int32_t num_seqs) const {
  return num_seqs >= 1 && num_seqs <= kMaxSeqs ? plain_[static_cast<size_t>(num_seqs - 1)].value() : 0.0;
}

bool SpecCostMeter::WantsPlainPass(int32_t num_seqs) {
  if (num_seqs < 1 || num_seqs > kMaxSeqs) return false;
  ++steps_since_plain_;
  if (plain_run_left_ > 0) {
    --plain_run_left_;
    return true;
  }
  const int64_t samples = plain_[static_cast<size_t>(num_seqs - 1)].samples();
  // The first run gives plain_run - 1 samples.
  const int32_t wait = samples < config_.plain_run ? config_.second_plain_after : config_.plain_every;
  const bool due = samples == 0 || steps_since_plain_ >= wait;
  if (due) plain_run_left_ = config_.plain_run - 1;
  return due;
}

void SpecCostMeter::RecordOtherPass() {
  last_plain_seqs_ = 0;
}

void SpecCostMeter::RecordPass(int32_t num_seqs, int32_t draft_rows, double seconds) {
  const int32_t previous_plain_seqs = last_plain_seqs_;
  last_plain_seqs_ = draft_rows == 0 ? num_seqs : 0;
  if (num_seqs < 1 || num_seqs > kMaxSeqs || seconds <= 0) return;
  RecentMedian& plain = plain_[static_cast<size_t>(num_seqs - 1)];
  if (draft_rows == 0) {
    steps_since_plain_ = 0;
    if (previous_plain_seqs == num_seqs) plain.Add(seconds);
    return;
  }
  if (plain.samples() == 0) return;
  // Each row's extra time against each sequence's share of the plain pass.
  const double share = plain.value() / num_seqs;
  row_cost_.Add(std::clamp((seconds - plain.value()) / draft_rows / share, 0.0, kMaxShare));
}

void SpecCostMeter::RecordDrafting(int32_t num_seqs, int32_t draft_tokens, double seconds) {
  const double plain = plain_seconds(num_seqs);
  if (draft_tokens <= 0 || plain <= 0 || seconds <= 0) return;
  // Each token's drafting time against each sequence's share of the plain
  // pass: a draft pass over the sequences, against the target's plain pass
  // over as many, when all draft alike.
  const double share = plain / num_seqs;
  draft_cost_.Add(std::clamp(seconds / draft_tokens / share, 0.0, kMaxShare));
}

}  // namespace kiln
