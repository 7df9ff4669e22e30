// What a profile adds up to: the recorded spans nested per track, and for
// each kind of step (prefill, decode, or a tensor graph's run) the time of
// its kernels by op and of everything else it did, which together make up
// the steps' time exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/profiler.h"
#include "core/status.h"

namespace kiln::bench {

// For each event, the index of the span it lies in on its track (the
// innermost), or -1. Counter events have no parent and are no parent.
// Fails when two spans of a track overlap without one holding the other.
Expected<std::vector<int32_t>> NestProfileEvents(const std::vector<ProfileEvent>& events);

// One row of the table: calls, time, and the bytes and FLOPs they moved
// and computed (kernels; zero for the rest).
struct ProfileRow {
  std::string name;  // the op (kernels) or what the time went to
  int64_t calls = 0;
  double seconds = 0;
  double bytes = 0;
  double flops = 0;
};

struct PhaseProfile {
  ProfilePhase phase = ProfilePhase::kNone;
  std::string name;  // "prefill", "decode", "run"
  int64_t steps = 0;
  double step_seconds = 0;
  // The kernels of the steps' forward passes by op, the most time first
  // (kernels run elsewhere, such as a draft model's within "propose
  // drafts", are part of that span's time).
  std::vector<ProfileRow> kernels;
  // The spans directly within the steps other than the forward pass (by
  // name, the most time first); then "forward, between kernels" and
  // "step, between spans": the time in neither.
  std::vector<ProfileRow> other;

  double kernel_seconds() const;
  double other_seconds() const;
};

// The steps (spans of category "step") by phase, in order prefill, decode,
// run; phases without steps are left out.
Expected<std::vector<PhaseProfile>> SummarizeProfile(const std::vector<ProfileEvent>& events);

}  // namespace kiln::bench
