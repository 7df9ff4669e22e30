// Temperature, top-k, min-p and top-p over a draft model's logits.
#include "engine/draft_distribution.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace kiln {

void DraftDistribution(const float* logits, int64_t vocab, const SamplingParams& params, float* q) {
  const auto n = static_cast<size_t>(vocab);
  auto value = [&](size_t i) {
    return std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
  };
  size_t best = 0;
  for (size_t i = 1; i < n; ++i) {
    if (value(i) > value(best)) best = i;
  }
  std::fill(q, q + n, 0.0f);
  if (params.temperature <= 0 || !std::isfinite(value(best))) {
    q[best] = 1.0f;
    return;
  }
  // Weights relative to the largest logit, in double so that a flat
  // distribution over a large vocabulary keeps its precision.
  const double inv_t = 1.0 / params.temperature;
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = std::exp((static_cast<double>(value(i)) - value(best)) * inv_t);
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return w[static_cast<size_t>(a)] > w[static_cast<size_t>(b)];
  });
  size_t keep = n;
  if (params.top_k > 0) keep = std::min(keep, static_cast<size_t>(params.top_k));
  if (params.min_p > 0) {
    // The largest weight is 1: min-p keeps weights of at least min_p.
    size_t k = 1;
    while (k < keep && w[static_cast<size_t>(order[k])] >= params.min_p) ++k;
    keep = k;
  }
  double total = 0;
  for (size_t k = 0; k < keep; ++k) total += w[static_cast<size_t>(order[k])];
  if (params.top_p < 1) {
    // The smallest head whose mass reaches top_p.
    double mass = 0;
    size_t k = 0;
    while (k < keep) {
      mass += w[static_cast<size_t>(order[k])];
      ++k;
      if (mass >= params.top_p * total) break;
    }
    keep = k;
    total = mass;
  }
  for (size_t k = 0; k < keep; ++k) {
    const auto id = static_cast<size_t>(order[k]);
    q[id] = static_cast<float>(w[id] / total);
  }
}

int32_t DrawFromDistribution(const float* q, int64_t vocab, Rng& rng) {
  const double u = rng.Uniform();
  double cumulative = 0;
  int32_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (q[i] <= 0) continue;
    last = static_cast<int32_t>(i);
    cumulative += q[i];
    if (u < cumulative) return last;
  }
  return last;  // rounding left u above the total: the last possible id
}

}  // namespace kiln
