// A Prometheus histogram: counts of observations at or below fixed bucket
// bounds, their sum and their count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::server {

class Histogram {
 public:
  // REQUIRES: `bounds` ascending; +Inf is implied after the last.
  explicit Histogram(std::vector<double> bounds);

  // Not thread-safe: the caller serializes.
  void Observe(double value);

  // The _bucket (cumulative, le="..." and le="+Inf"), _sum and _count lines
  // of metric `name`, after its # HELP and # TYPE lines.
  std::string Render(const std::string& name, const std::string& help) const;

  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  int64_t count_ = 0;
  double sum_ = 0;
};

// A number as Prometheus text writes it ("0.005", "+Inf").
std::string PrometheusNumber(double value);

}  // namespace kiln::server
