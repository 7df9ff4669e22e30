// Softmax, top-k and grouping of a mixture's router outputs: plain loops
// (a few experts per row), so also their own reference.
#include "backend/cpu/kernels/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::cpu {

void RouteRows(const float* logits, int64_t rows, int64_t ldl, int64_t experts, int64_t k, bool normalize,
               int32_t* expert, float* weight) {
  // Per thread: a vector's allocation per call cost a decoding step more
  // than the routing.
  thread_local std::vector<float> p;
  p.resize(static_cast<size_t>(experts));
  for (int64_t m = 0; m < rows; ++m) {
    const float* l = logits + m * ldl;
    float max = l[0];
    for (int64_t e = 1; e < experts; ++e) max = std::max(max, l[e]);
    float sum = 0;
    for (int64_t e = 0; e < experts; ++e) {
      p[static_cast<size_t>(e)] = std::exp(l[e] - max);
      sum += p[static_cast<size_t>(e)];
    }
    for (float& v : p) v /= sum;
    int32_t* chosen = expert + m * k;
    float* w = weight + m * k;
    // The k largest in one pass, kept in descending order: an expert goes
    // in above those it strictly exceeds, so ties stay in expert order.
    // (A selection by rank, k passes over every expert, took most of a
    // decoding layer's routing with 128 experts.)
    int64_t kept = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const float v = p[static_cast<size_t>(e)];
      if (kept == k && !(v > w[k - 1])) continue;
      int64_t i = std::min(kept, k - 1);
      if (kept < k) ++kept;
      for (; i > 0 && v > w[i - 1]; --i) {
        w[i] = w[i - 1];
        chosen[i] = chosen[i - 1];
      }
      w[i] = v;
      chosen[i] = static_cast<int32_t>(e);
    }
    if (normalize) {
      float total = 0;
      for (int64_t j = 0; j < k; ++j) total += w[j];
      for (int64_t j = 0; j < k; ++j) w[j] /= total;
    }
  }
}

void GroupByExpert(const int32_t* expert, const float* weight, int64_t rows, int64_t k, int64_t experts,
                   int32_t* offset, int32_t* row, float* row_weight) {
  for (int64_t e = 0; e <= experts; ++e) offset[e] = 0;
  for (int64_t i = 0; i < rows * k; ++i) ++offset[expert[i] + 1];
  for (int64_t e = 0; e < experts; ++e) offset[e + 1] += offset[e];
  std::vector<int32_t> next(offset, offset + experts);
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = expert[m * k + j];
      const int32_t at = next[static_cast<size_t>(e)]++;
      row[at] = static_cast<int32_t>(m);
      row_weight[at] = weight[m * k + j];
    }
  }
}

}  // namespace kiln::cpu
