// Pearson's chi-squared test that two samples of categories come from the
// same distribution, for the tests of sampling with speculative decoding.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>

namespace kiln::stats_test {

// Q(a, x), the regularized upper incomplete gamma function: a series below
// x = a + 1, a continued fraction (modified Lentz) above.
inline double UpperGammaQ(double a, double x) {
  if (x <= 0) return 1;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double term = 1 / a, sum = term;
    for (int n = 1; n < 10000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
    }
    return 1 - sum * std::exp(log_prefix);
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

// P(X >= statistic) for X chi-squared with `df` degrees of freedom.
inline double ChiSquaredPValue(double statistic, int df) {
  return UpperGammaQ(df / 2.0, statistic / 2.0);
}

struct ChiSquared {
  double statistic = 0;
  int df = 0;
  double p_value = 1;
};

// The homogeneity test of two samples given as counts per category.
// Categories with fewer than `min_pooled` draws in both samples together
// are merged into one, so that every expected count is large enough for
// the chi-squared approximation.
template <typename Key>
ChiSquared Homogeneity(const std::map<Key, int64_t>& a, const std::map<Key, int64_t>& b,
                       int64_t min_pooled = 20) {
  std::map<Key, std::pair<int64_t, int64_t>> cells;
  for (const auto& [key, n] : a) cells[key].first += n;
  for (const auto& [key, n] : b) cells[key].second += n;
  std::vector<std::pair<int64_t, int64_t>> kept;
  std::pair<int64_t, int64_t> rare{0, 0};
  for (const auto& [key, counts] : cells) {
    if (counts.first + counts.second >= min_pooled) {
      kept.push_back(counts);
    } else {
      rare.first += counts.first;
      rare.second += counts.second;
    }
  }
  if (rare.first + rare.second > 0) kept.push_back(rare);
  double total_a = 0, total_b = 0;
  for (const auto& [x, y] : kept) {
    total_a += static_cast<double>(x);
    total_b += static_cast<double>(y);
  }
  ChiSquared result;
  const double total = total_a + total_b;
  for (const auto& [x, y] : kept) {
    const double n = static_cast<double>(x + y);
    const double expected_a = n * total_a / total, expected_b = n * total_b / total;
    result.statistic +=
        (x - expected_a) * (x - expected_a) / expected_a + (y - expected_b) * (y - expected_b) / expected_b;
  }
  result.df = static_cast<int>(kept.size()) - 1;
  result.p_value = result.df > 0 ? ChiSquaredPValue(result.statistic, result.df) : 1;
  return result;
}

}  // namespace kiln::stats_test
