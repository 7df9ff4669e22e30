// The --profile table: per phase, each op's calls, time, share of the
// steps, bytes and FLOPs, the rate they were moved and computed at, and
// the fraction of the roofline that is (memory- or compute-bound by the
// op's arithmetic intensity against the machine's ridge point); then what
// the rest of the steps' time went to.
#pragma once

#include <string>
#include <vector>

#include "bench/profile_summary.h"
#include "bench/roofline.h"

namespace kiln::bench {

// The peaks ops are compared with; a zero rate leaves the bound and the
// fractions out.
struct ProfilePeaks {
  PeakChoice compute;
  PeakChoice bandwidth;
};

// "memory" or "compute": which peak bounds an op of this intensity, or ""
// without both peaks.
std::string BoundOf(double flops, double bytes, const ProfilePeaks& peaks);

// The fraction of its bounding peak an op reached (0 without peaks).
double RooflineFraction(const ProfileRow& row, const ProfilePeaks& peaks);

std::string FormatProfileTable(const std::vector<PhaseProfile>& phases, const ProfilePeaks& peaks);

}  // namespace kiln::bench
