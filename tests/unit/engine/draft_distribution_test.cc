// The draft's q: temperature, top-k, min-p and top-p against values worked
// out by hand, and draws that follow it.
#include "engine/draft_distribution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace kiln {
namespace draft_distribution_tests {

std::vector<float> Q(const std::vector<float>& logits, const SamplingParams& params) {
  std::vector<float> q(logits.size(), -1.0f);
  DraftDistribution(logits.data(), static_cast<int64_t>(logits.size()), params, q.data());
  return q;
}

TEST(DraftDistributionTest, GreedyIsOneAtTheLowestLargest) {
  SamplingParams greedy;
  greedy.temperature = 0;
  EXPECT_EQ(Q({1, 3, 3, 2}, greedy), (std::vector<float>{0, 1, 0, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Q({nan, 1, nan, 2}, greedy), (std::vector<float>{0, 0, 0, 1}));
}

TEST(DraftDistributionTest, TemperatureIsASoftmax) {
  SamplingParams params;
  params.temperature = 0.5;
  const std::vector<float> q = Q({0, std::log(2.0f), 0}, params);
  // Weights 1, 4, 1 at temperature 0.5.
  EXPECT_NEAR(q[0], 1.0 / 6, 1e-6);
  EXPECT_NEAR(q[1], 4.0 / 6, 1e-6);
  EXPECT_NEAR(q[2], 1.0 / 6, 1e-6);
}

TEST(DraftDistributionTest, TruncationsKeepTheHead) {
  const std::vector<float> logits = {std::log(1.0f), std::log(4.0f), std::log(3.0f), std::log(2.0f)};
  SamplingParams top_k;
  top_k.top_k = 2;
  std::vector<float> q = Q(logits, top_k);
  EXPECT_NEAR(q[1], 4.0 / 7, 1e-6);
  EXPECT_NEAR(q[2], 3.0 / 7, 1e-6);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[3], 0);

  SamplingParams top_p;
  top_p.top_p = 0.75;  // 4/10 + 3/10 = 0.7 < 0.75: the third is needed
  q = Q(logits, top_p);
  EXPECT_NEAR(q[1], 4.0 / 9, 1e-6);
  EXPECT_NEAR(q[3], 2.0 / 9, 1e-6);
  EXPECT_EQ(q[0], 0);

  SamplingParams min_p;
  min_p.min_p = 0.6;  // weights over the largest: 0.25, 1, 0.75, 0.5
  q = Q(logits, min_p);
  EXPECT_NEAR(q[1], 4.0 / 7, 1e-6);
  EXPECT_NEAR(q[2], 3.0 / 7, 1e-6);
  EXPECT_EQ(q[3], 0);
}

TEST(DraftDistributionTest, DrawsFollowQ) {
  const std::vector<float> q = {0.1f, 0.0f, 0.6f, 0.3f};
  Rng rng(7);
  std::vector<int> counts(q.size());
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(DrawFromDistribution(q.data(), 4, rng))];
  EXPECT_EQ(counts[1], 0);
  for (size_t i = 0; i < q.size(); ++i) {
    // Five standard deviations of a binomial count.
    const double sd = std::sqrt(draws * q[i] * (1 - q[i]));
    EXPECT_NEAR(counts[i], draws * q[i], 5 * sd + 1) << i;
  }
}

}  // namespace draft_distribution_tests
}  // namespace kiln
