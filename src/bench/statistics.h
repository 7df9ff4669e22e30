// Summaries of repeated measurements: median and tail percentiles, for the
// figures every benchmark mode reports.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::bench {

// The p-th percentile (p in [0, 100]) of `values`, interpolating linearly
// between the two nearest ranks (numpy's default "linear" method). 0 for an
// empty list; p outside [0, 100] is clamped.
double Percentile(std::vector<double> values, double p);

// Median, tail percentiles and extremes of one list of measurements.
struct Summary {
  int64_t count = 0;
  double mean = 0;
  double median = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
};

// The summary of `values`; all zero (count 0) for an empty list.
Summary Summarize(const std::vector<double>& values);

// {"count", "mean", "median", "p90", "p99", "min", "max"}.
nlohmann::ordered_json ToJson(const Summary& s);
// The inverse of ToJson; missing or non-numeric fields read as 0.
Summary SummaryFromJson(const nlohmann::json& j);

// A rate's summary from the times it was measured over: `amount` divided by
// each time, so that the rate's p90 and p99 are the slow tail (the rate at
// the 90th and 99th percentile of time) and its mean is amount over the mean
// time. Times that are not positive are skipped.
Summary RateSummary(double amount, const std::vector<double>& seconds);

}  // namespace kiln::bench
