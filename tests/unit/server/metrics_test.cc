// Prometheus histograms and the server's metrics text: cumulative buckets,
// sums and counts, responses by status, tokens, and the engine's gauges.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "server/histogram.h"

namespace kiln::server {
namespace metrics_tests {

// name{labels} -> value, from Prometheus text (comments skipped).
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

TEST(HistogramTest, BucketsAreCumulativeAndInclusive) {
  Histogram h({0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.1);  // "le" is inclusive
  h.Observe(0.5);
  h.Observe(7);
  auto s = Samples(h.Render("lat", "Latency."));
  EXPECT_EQ(s["lat_bucket{le=\"0.1\"}"], 2);
  EXPECT_EQ(s["lat_bucket{le=\"1\"}"], 3);
  EXPECT_EQ(s["lat_bucket{le=\"+Inf\"}"], 4);
  EXPECT_EQ(s["lat_count"], 4);
  EXPECT_DOUBLE_EQ(s["lat_sum"], 7.65);
  EXPECT_NE(h.Render("lat", "Latency.").find("# TYPE lat histogram\n"), std::string::npos);
}

TEST(ServerMetricsTest, CountsResponsesTokensAndLatencies) {
  ServerMetrics m;
  m.CountResponse(200);
  m.CountResponse(200);
  m.CountResponse(400);
  RequestStats a;
  a.arrival_time = 10;
  a.first_scheduled_time = 10.5;
  a.first_token_time = 11;
  a.last_token_time = 13;
  a.finish_time = 13;
  a.prompt_tokens = 7;
  a.cached_tokens = 4;
  a.completion_tokens = 5;
  a.finish_reason = FinishReason::kLength;
  m.RecordFinished(a);
  RequestStats aborted;  // ended before its first token
  aborted.arrival_time = 20;
  aborted.finish_time = 21;
  aborted.prompt_tokens = 3;
  aborted.finish_reason = FinishReason::kAbort;
  m.RecordFinished(aborted);

  auto s = Samples(m.Render(nullptr));
  EXPECT_EQ(s["kiln_requests_total{status=\"200\"}"], 2);
  EXPECT_EQ(s["kiln_requests_total{status=\"400\"}"], 1);
  EXPECT_EQ(s["kiln_request_finished_total{reason=\"length\"}"], 1);
  EXPECT_EQ(s["kiln_request_finished_total{reason=\"abort\"}"], 1);
  EXPECT_EQ(s["kiln_request_finished_total{reason=\"stop\"}"], 0);
  EXPECT_EQ(s["kiln_prompt_tokens_total"], 10);
  EXPECT_EQ(s["kiln_cached_prompt_tokens_total"], 4);
  EXPECT_EQ(s["kiln_completion_tokens_total"], 5);
  EXPECT_EQ(s["kiln_time_to_first_token_seconds_count"], 1);
  EXPECT_DOUBLE_EQ(s["kiln_time_to_first_token_seconds_sum"], 1.0);
  EXPECT_EQ(s["kiln_time_per_output_token_seconds_count"], 1);
  EXPECT_DOUBLE_EQ(s["kiln_time_per_output_token_seconds_sum"], 0.5);
  EXPECT_EQ(s["kiln_e2e_request_latency_seconds_count"], 2);
  EXPECT_DOUBLE_EQ(s["kiln_e2e_request_latency_seconds_sum"], 4.0);
  EXPECT_EQ(s["kiln_request_queue_time_seconds_count"], 1);
  // No engine yet: no engine gauges.
  EXPECT_EQ(s.count("kiln_kv_cache_usage_ratio"), 0u);
}

TEST(ServerMetricsTest, EngineGaugesAndRatios) {
  ServerMetrics m;
  EngineCounters c;
  c.num_running = 3;
  c.num_waiting = 2;
  c.kv_blocks_total = 100;
  c.kv_blocks_used = 25;
  c.prefix_cache_queries = 40;
  c.prefix_cache_hits = 10;
  auto s = Samples(m.Render(&c));
  EXPECT_EQ(s["kiln_num_requests_running"], 3);
  EXPECT_EQ(s["kiln_num_requests_waiting"], 2);
  EXPECT_DOUBLE_EQ(s["kiln_kv_cache_usage_ratio"], 0.25);
  EXPECT_EQ(s["kiln_kv_cache_blocks_used"], 25);
  EXPECT_EQ(s["kiln_kv_cache_blocks_total"], 100);
  EXPECT_DOUBLE_EQ(s["kiln_prefix_cache_hit_rate"], 0.25);
  EXPECT_EQ(s["kiln_prefix_cache_queries_total"], 40);
  EXPECT_EQ(s["kiln_spec_acceptance_rate"], 0);  // no speculation: no division by zero
  EXPECT_EQ(s["kiln_spec_mean_accepted_tokens"], 0);
}

TEST(ServerMetricsTest, SpeculativeDecodingAcceptance) {
  ServerMetrics m;
  EngineCounters c;
  c.spec_verifications = 10;
  c.spec_draft_tokens = 40;
  c.spec_accepted_tokens = 25;
  c.spec_draft_seconds = 0.75;
  c.spec_row_cost = 0.125;
  c.spec_draft_cost = 0.5;
  auto s = Samples(m.Render(&c));
  EXPECT_EQ(s["kiln_spec_verifications_total"], 10);
  EXPECT_EQ(s["kiln_spec_draft_tokens_total"], 40);
  EXPECT_EQ(s["kiln_spec_accepted_tokens_total"], 25);
  EXPECT_DOUBLE_EQ(s["kiln_spec_acceptance_rate"], 0.625);
  EXPECT_DOUBLE_EQ(s["kiln_spec_mean_accepted_tokens"], 2.5);
  EXPECT_DOUBLE_EQ(s["kiln_spec_draft_seconds_total"], 0.75);
  EXPECT_DOUBLE_EQ(s["kiln_spec_row_cost"], 0.125);
  EXPECT_DOUBLE_EQ(s["kiln_spec_draft_cost"], 0.5);
}

}  // namespace metrics_tests
}  // namespace kiln::server
