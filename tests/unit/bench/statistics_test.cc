// Percentiles and summaries: checked against values numpy's default
// (linear) method gives for the same lists.
#include "bench/statistics.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln::bench {
namespace statistics_tests {

TEST(Percentile, InterpolatesBetweenClosestRanks) {
  const std::vector<double> v = {15, 20, 35, 40, 50};  // unsorted input is fine too
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 15);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 35);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 50);
  // numpy.percentile([15, 20, 35, 40, 50], 90) == 46.0; 99 -> 49.6; 25 -> 20.
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 46.0);
  EXPECT_NEAR(Percentile(v, 99), 49.6, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 20.0);
  EXPECT_DOUBLE_EQ(Percentile({50, 15, 40, 20, 35}, 90), 46.0);
}

TEST(Percentile, EvenCountMedianAveragesTheMiddlePair) {
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
}

TEST(Percentile, EdgeCases) {
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({1, 2}, -5), 1);   // clamped to 0
  EXPECT_EQ(Percentile({1, 2}, 250), 2);  // clamped to 100
}

TEST(Summarize, AllFields) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  Summary s = Summarize(v);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.median, 50.5);
  EXPECT_NEAR(s.p90, 90.1, 1e-9);  // numpy: 90.1
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 100);
  EXPECT_EQ(Summarize({}).count, 0);
}

TEST(RateSummary, TailIsTheSlowEnd) {
  // 100 tokens over times 1..10 s: the median rate is 100 / 5.5 and the
  // p90 rate is 100 over the p90 time, i.e. slower than the median.
  std::vector<double> seconds;
  for (int i = 1; i <= 10; ++i) seconds.push_back(i);
  Summary r = RateSummary(100, seconds);
  EXPECT_EQ(r.count, 10);
  EXPECT_DOUBLE_EQ(r.median, 100 / 5.5);
  EXPECT_DOUBLE_EQ(r.p90, 100 / Percentile(seconds, 90));
  EXPECT_LT(r.p90, r.median);
  EXPECT_LT(r.p99, r.p90);
  EXPECT_DOUBLE_EQ(r.max, 100.0);
  EXPECT_DOUBLE_EQ(r.min, 10.0);
  EXPECT_DOUBLE_EQ(r.mean, 100 / 5.5);
}

TEST(RateSummary, SkipsNonPositiveTimes) {
  Summary r = RateSummary(10, {0, -1, 2});
  EXPECT_EQ(r.count, 1);
  EXPECT_DOUBLE_EQ(r.median, 5);
  EXPECT_EQ(RateSummary(10, {0}).count, 0);
}

TEST(SummaryJson, RoundTrips) {
  Summary s = Summarize({3, 1, 4, 1, 5, 9, 2, 6});
  nlohmann::json j = ToJson(s);
  for (const char* key : {"count", "mean", "median", "p90", "p99", "min", "max"}) EXPECT_TRUE(j.contains(key)) << key;
  Summary back = SummaryFromJson(j);
  EXPECT_EQ(back.count, s.count);
  EXPECT_DOUBLE_EQ(back.median, s.median);
  EXPECT_DOUBLE_EQ(back.p99, s.p99);
  EXPECT_EQ(SummaryFromJson(nlohmann::json("not an object")).count, 0);
}

}  // namespace statistics_tests
}  // namespace kiln::bench
