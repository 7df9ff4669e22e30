// A mixture's routing against the definition in double precision (softmax
// over all experts, the k largest, renormalized or not), ties to the lower
// expert, and the grouping of rows by expert.
#include "backend/cpu/kernels/expert_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernel_test_util.h"

namespace kiln::cpu {
namespace expert_routing_tests {

TEST(ExpertRouting, MatchesTheDefinition) {
  const int64_t rows = 23, experts = 16, ldl = 19;
  std::vector<float> logits = testing::RandomFloats(static_cast<size_t>(rows * ldl), 5, -4.0f, 4.0f);
  for (int64_t k : {1, 2, 8}) {
    for (bool normalize : {false, true}) {
      std::vector<int32_t> chosen(static_cast<size_t>(rows * k));
      std::vector<float> weight(chosen.size());
      RouteRows(logits.data(), rows, ldl, experts, k, normalize, chosen.data(), weight.data());
      for (int64_t m = 0; m < rows; ++m) {
        const float* l = logits.data() + m * ldl;
        std::vector<double> p(static_cast<size_t>(experts));
        double sum = 0;
        for (int64_t e = 0; e < experts; ++e) sum += p[static_cast<size_t>(e)] = std::exp(static_cast<double>(l[e]));
        for (double& v : p) v /= sum;
        std::vector<int32_t> order(static_cast<size_t>(experts));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
        double top = 0;
        for (int64_t j = 0; j < k; ++j) top += p[static_cast<size_t>(order[j])];
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ(chosen[m * k + j], order[j]) << "row " << m << " rank " << j;
          const double want = p[static_cast<size_t>(order[j])] / (normalize ? top : 1.0);
          EXPECT_NEAR(weight[m * k + j], want, 1e-6) << "row " << m << " rank " << j;
        }
      }
    }
  }
}

TEST(ExpertRouting, TiesGoToTheLowerExpert) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 3.0f, 0.0f};
  std::vector<int32_t> chosen(2);
  std::vector<float> weight(2);
  RouteRows(logits.data(), 1, 5, 5, 2, true, chosen.data(), weight.data());
  EXPECT_EQ(chosen, (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(weight[0], 0.5f);
  EXPECT_FLOAT_EQ(weight[1], 0.5f);
}

TEST(ExpertRouting, GroupsRowsByExpertInRowOrder) {
  // Rows 0..3, two experts each, of 4.
  const std::vector<int32_t> chosen = {2, 0, 0, 3, 2, 3, 0, 2};
  const std::vector<float> weight = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  std::vector<int32_t> offset(5), row(8);
  std::vector<float> row_weight(8);
  GroupByExpert(chosen.data(), weight.data(), 4, 2, 4, offset.data(), row.data(), row_weight.data());
  EXPECT_EQ(offset, (std::vector<int32_t>{0, 3, 3, 6, 8}));
  EXPECT_EQ(row, (std::vector<int32_t>{0, 1, 3, 0, 2, 3, 1, 2}));
  EXPECT_EQ(row_weight, (std::vector<float>{0.2f, 0.3f, 0.7f, 0.1f, 0.5f, 0.8f, 0.4f, 0.6f}));
}

}  // namespace expert_routing_tests
}  // namespace kiln::cpu
