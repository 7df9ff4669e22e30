// Percentiles by linear interpolation between closest ranks.
#include "bench/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::bench {
namespace {

// The p-th percentile of values already sorted ascending. REQUIRES: not empty.
double SortedPercentile(const std::vector<double>& sorted, double p) {
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * weight;
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return SortedPercentile(values, p);
}

Summary Summarize(const std::vector<double>& values) {
  Summary s;
  if (values.empty()) return s;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.count = static_cast<int64_t>(sorted.size());
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
  s.median = SortedPercentile(sorted, 50);
  s.p90 = SortedPercentile(sorted, 90);
  s.p99 = SortedPercentile(sorted, 99);
  s.min = sorted.front();
  s.max = sorted.back();
  return s;
}

nlohmann::ordered_json ToJson(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"median", s.median}, {"p90", s.p90},
          {"p99", s.p99},     {"min", s.min},   {"max", s.max}};
}

Summary SummaryFromJson(const nlohmann::json& j) {
  auto number = [&](const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
  };
  Summary s;
  s.count = static_cast<int64_t>(number("count"));
  s.mean = number("mean");
  s.median = number("median");
  s.p90 = number("p90");
  s.p99 = number("p99");
  s.min = number("min");
  s.max = number("max");
  return s;
}

Summary RateSummary(double amount, const std::vector<double>& seconds) {
  std::vector<double> positive;
  for (double t : seconds) {
    if (t > 0) positive.push_back(t);
  }
  Summary time = Summarize(positive);
  Summary rate;
  if (time.count == 0) return rate;
  rate.count = time.count;
  rate.mean = amount / time.mean;
  rate.median = amount / time.median;
  rate.p90 = amount / time.p90;
  rate.p99 = amount / time.p99;
  rate.min = amount / time.max;
  rate.max = amount / time.min;
  return rate;
}

}  // namespace kiln::bench
