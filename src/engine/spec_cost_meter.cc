// Speculative decoding's measured costs.
#include "engine/spec_cost_meter.h"

#include <algorithm>

namespace kiln {

namespace {

// A share past this many plain passes is a pass that waited for the
// machine, not a cost.
constexpr double kMaxShare = 4;

}  // namespace

SpecCostMeter::SpecCostMeter(const SpecCostConfig& config)
    : config_(config), row_cost_(config.initial_row_cost), draft_cost_(config.initial_draft_cost) {}

double SpecCostMeter::plain_seconds(int32_t num_seqs) const {
  return num_seqs >= 1 && num_seqs <= kMaxSeqs ? plain_[static_cast<size_t>(num_seqs - 1)] : 0.0;
}

bool SpecCostMeter::WantsPlainPass(int32_t num_seqs) {
  if (num_seqs < 1 || num_seqs > kMaxSeqs) return false;
  ++steps_since_plain_;
  const int64_t samples = plain_samples_[static_cast<size_t>(num_seqs - 1)];
  if (samples == 0) return true;
  return steps_since_plain_ >= (samples == 1 ? config_.second_plain_after : config_.plain_every);
}

void SpecCostMeter::Average(double& value, int64_t& samples, double sample, double down) const {
  if (samples == 0) {
    value = sample;
  } else {
    value += (sample < value ? down : config_.smoothing_up) * (sample - value);
  }
  ++samples;
}

void SpecCostMeter::RecordPass(int32_t num_seqs, int32_t draft_rows, double seconds) {
  if (num_seqs < 1 || num_seqs > kMaxSeqs || seconds <= 0) return;
  const auto b = static_cast<size_t>(num_seqs - 1);
  if (draft_rows == 0) {
    Average(plain_[b], plain_samples_[b], seconds, /*down=*/1);
    steps_since_plain_ = 0;
    return;
  }
  if (plain_[b] <= 0) return;
  // Each row's extra time against each sequence's share of the plain pass.
  const double share = plain_[b] / num_seqs;
  Average(row_cost_, row_samples_, std::clamp((seconds - plain_[b]) / draft_rows / share, 0.0, kMaxShare),
          config_.smoothing_down);
}

void SpecCostMeter::RecordDrafting(int32_t num_seqs, int32_t draft_tokens, double seconds) {
  const double plain = plain_seconds(num_seqs);
  if (draft_tokens <= 0 || plain <= 0 || seconds <= 0) return;
  // Each token's drafting time against each sequence's share of the plain
  // pass: a draft pass over the sequences, against the target's plain pass
  // over as many, when all draft alike.
  const double share = plain / num_seqs;
  Average(draft_cost_, draft_samples_, std::clamp(seconds / draft_tokens / share, 0.0, kMaxShare),
          config_.smoothing_down);
}

}  // namespace kiln
