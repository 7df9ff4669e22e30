// Prometheus histograms in text exposition format.
#include "server/histogram.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kiln::server {

std::string PrometheusNumber(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  return fmt::format("{}", value);  // shortest text that reads back exactly
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  // The first bucket whose bound is >= value (Prometheus buckets are "le").
  size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[bucket] += 1;
  count_ += 1;
  sum_ += value;
}

std::string Histogram::Render(const std::string& name, const std::string& help) const {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, PrometheusNumber(bounds_[i]), cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, PrometheusNumber(sum_), name, count_);
  return out;
}

}  // namespace kiln::server
