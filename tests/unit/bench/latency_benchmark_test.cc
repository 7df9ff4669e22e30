// The latency mode on a tiny real model: it runs, every field is filled,
// and the fields agree with each other (counts, rates against times,
// bytes and FLOPs against the model's shapes). No timing is asserted.
#include "bench/latency_benchmark.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/model_figures.h"
#include "format/model_config.h"
#include "testing/test_paths.h"

namespace kiln::bench {
namespace latency_benchmark_tests {

LatencyOptions Tiny() {
  LatencyOptions o;
  o.engine.model = testing::ModelDir("tiny-qwen2");
  o.engine.threads = 2;
  o.input_len = 40;
  o.output_len = 6;
  o.batch_sizes = {1, 3};
  o.warmup = 1;
  o.runs = 3;
  o.seed = 7;
  return o;
}

TEST(LatencyBenchmark, TinyModelFieldsAreConsistent) {
  int progress_calls = 0;
  auto report = RunLatencyBenchmark(Tiny(), [&](const LatencyProgress& p) {
    ++progress_calls;
    EXPECT_EQ(p.total, 4);
    EXPECT_EQ(p.warmup, p.run == 1);
    EXPECT_GT(p.seconds, 0);
  });
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(progress_calls, 8);
  EXPECT_EQ(report->model, testing::ModelDir("tiny-qwen2"));
  EXPECT_GT(report->figures.weight_bytes, 0);
  EXPECT_EQ(report->figures.arithmetic, WeightArithmetic::kFp32);  // the tiny models are fp32
  EXPECT_EQ(report->figures.threads, 2);

  auto config = ModelConfigFromHfFile(testing::ModelDir("tiny-qwen2") + "/config.json");
  ASSERT_TRUE(config.ok());
  // Every matrix of the model at 4 bytes (the LM head is the tied embedding).
  const int64_t h = config->hidden_size, q = config->num_heads * config->head_dim,
                kv = config->num_kv_heads * config->head_dim, ffn = config->intermediate_size;
  const int64_t per_layer = h * q + 2 * h * kv + q * h + 3 * h * ffn;
  EXPECT_EQ(report->figures.weight_bytes, 4 * (config->num_layers * per_layer + config->vocab_size * h));

  ASSERT_EQ(report->rows.size(), 2u);
  for (const LatencyRow& r : report->rows) {
    SCOPED_TRACE(r.batch_size);
    const double b = r.batch_size;
    EXPECT_EQ(r.runs, 3);
    EXPECT_EQ(r.ttft_s.count, r.batch_size * 3);
    EXPECT_EQ(r.prefill_s.count, 3);
    EXPECT_EQ(r.tpot_s.count, 3 * (6 - 1));  // one per decode pass
    EXPECT_EQ(r.decode_tokens_per_s.count, 3);
    EXPECT_EQ(r.e2e_s.count, 3);
    EXPECT_GT(r.ttft_s.min, 0);
    // The last first token is the prefill time; the run ends after it.
    EXPECT_DOUBLE_EQ(r.ttft_s.max, r.prefill_s.max);
    EXPECT_LT(r.prefill_s.max, r.e2e_s.max);
    EXPECT_LE(r.ttft_s.median, r.ttft_s.p90);
    EXPECT_LE(r.ttft_s.p90, r.ttft_s.p99);
    EXPECT_DOUBLE_EQ(r.prefill_tokens_per_s.median, b * 40 / r.prefill_s.median);
    EXPECT_LE(r.prefill_tokens_per_s.p90, r.prefill_tokens_per_s.median);
    // Decode time is the sum of its passes.
    EXPECT_NEAR(r.decode_tokens_per_s.mean, b * 5 / (r.tpot_s.mean * 5), 1e-6 * r.decode_tokens_per_s.mean);
    EXPECT_GT(r.peak_rss_bytes, 0);
    EXPECT_EQ(r.weight_bytes_per_step, report->figures.weight_bytes);
    EXPECT_NEAR(r.kv_bytes_per_step, b * (40 + 3) * report->figures.kv_bytes_per_token, 1e-6);
    EXPECT_DOUBLE_EQ(r.decode_bytes_per_s,
                     (static_cast<double>(r.weight_bytes_per_step) + r.kv_bytes_per_step) / r.tpot_s.median);
    EXPECT_GT(r.prefill_flops, 2.0 * b * 40 * config->num_layers * per_layer);
    EXPECT_DOUBLE_EQ(r.prefill_flops_per_s, r.prefill_flops / r.prefill_s.median);
    EXPECT_GT(r.decode_flops_per_step, 2.0 * b * (config->num_layers * per_layer + config->vocab_size * h));
    EXPECT_TRUE(r.contention.valid);
  }

  // Roofline fractions: achieved over peak, with the peak chosen for fp32.
  RooflineRow roof;
  roof.threads = 2;
  ComputeFigure fma;
  fma.name = "fp32_fma";
  fma.per_second = 1e12;
  roof.compute = {fma};
  BandwidthFigure bw;
  bw.pages = "thp";
  bw.bytes_per_s = 1e11;
  roof.bandwidth = {bw};
  const LatencyRow& one = report->rows[0];
  LatencyShares s = SharesOf(one, report->figures, &roof);
  EXPECT_DOUBLE_EQ(s.prefill_of_compute, one.prefill_flops_per_s / 1e12);
  EXPECT_DOUBLE_EQ(s.decode_of_bandwidth, one.decode_bytes_per_s / 1e11);
  EXPECT_EQ(SharesOf(one, report->figures, nullptr).prefill_of_compute, 0);

  const std::string table = FormatLatencyTable(*report, &roof);
  for (const char* text : {"TTFT p50", "prefill tok/s", "TPOT p50", "decode tok/s", "peak RSS", "of bandwidth",
                           "bandwidth peak", "compute peak for fp32 weights"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text;
  }
  nlohmann::json j = LatencyJson(*report, &roof);
  EXPECT_EQ(j["mode"], "latency");
  ASSERT_EQ(j["results"].size(), 2u);
  const nlohmann::json& row = j["results"][0];
  for (const char* key : {"ttft_s", "prefill_tokens_per_s", "tpot_s", "decode_tokens_per_s", "peak_rss_bytes",
                          "weight_bytes_per_decode_step", "decode_bandwidth", "decode_flops", "prefill_flops",
                          "contention"}) {
    EXPECT_TRUE(row.contains(key)) << key;
  }
  for (const char* key : {"median", "p90", "p99"}) EXPECT_TRUE(row["tpot_s"].contains(key)) << key;
  EXPECT_DOUBLE_EQ(row["decode_bandwidth"]["fraction"].get<double>(), s.decode_of_bandwidth);
}

TEST(LatencyBenchmark, OneOutputTokenHasNoDecode) {
  LatencyOptions o = Tiny();
  o.output_len = 1;
  o.batch_sizes = {2};
  o.warmup = 0;
  o.runs = 1;
  auto report = RunLatencyBenchmark(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->rows[0].tpot_s.count, 0);
  EXPECT_EQ(report->rows[0].decode_tokens_per_s.count, 0);
  EXPECT_EQ(report->rows[0].ttft_s.count, 2);
}

// With --spec-method ngram, greedy (the tiny models' greedy text repeats
// itself, so prompt lookup finds drafts): the speculation figures are
// filled, agree with each other and with the decode rate, and are printed.
TEST(LatencyBenchmark, SpeculationIsMeasuredAndReported) {
  LatencyOptions o = Tiny();
  o.output_len = 24;
  o.temperature = 0;
  o.batch_sizes = {1, 2};
  o.repeated_prompt = true;
  o.engine.spec_method = "ngram";
  o.engine.spec_tokens = 4;
  auto report = RunLatencyBenchmark(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->rows.size(), 2u);
  for (const LatencyRow& r : report->rows) {
    SCOPED_TRACE(r.batch_size);
    const SpecFigures& spec = r.spec;
    EXPECT_GT(spec.verifications, 0);
    EXPECT_GE(spec.draft_tokens, spec.verifications);
    EXPECT_LE(spec.draft_tokens, 4 * spec.verifications);
    EXPECT_GT(spec.accepted_tokens, 0);
    EXPECT_LE(spec.accepted_tokens, spec.draft_tokens);
    EXPECT_GT(spec.draft_seconds, 0);
    EXPECT_GT(spec.pass_seconds, spec.draft_seconds);
    EXPECT_DOUBLE_EQ(spec.accepted_per_pass(),
                     static_cast<double>(spec.accepted_tokens) / static_cast<double>(spec.verifications));
    // Accepted drafts save passes: fewer decode passes than tokens.
    EXPECT_LT(r.tpot_s.count, 3 * (24 - 1));
    EXPECT_EQ(r.decode_tokens_per_s.count, 3);
  }
  const std::string table = FormatLatencyTable(*report, nullptr);
  for (const char* text : {"Speculative decoding by ngram", "acceptance rate", "accepted per pass",
                           "drafting", "target passes"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text;
  }
  nlohmann::json j = LatencyJson(*report, nullptr);
  EXPECT_EQ(j["settings"]["spec_method"], "ngram");
  const nlohmann::json& spec = j["results"][1]["speculation"];
  EXPECT_EQ(spec["accepted_tokens"].get<int64_t>(), report->rows[1].spec.accepted_tokens);
  EXPECT_DOUBLE_EQ(spec["accepted_per_pass"].get<double>(), report->rows[1].spec.accepted_per_pass());
  EXPECT_GT(spec["acceptance_rate"].get<double>(), 0);
  EXPECT_LE(spec["acceptance_rate"].get<double>(), 1);
  EXPECT_TRUE(spec.contains("draft_seconds"));
  EXPECT_TRUE(spec.contains("target_pass_seconds"));

  // Without speculation no such section.
  LatencyOptions plain = Tiny();
  plain.batch_sizes = {1};
  plain.runs = 1;
  auto none = RunLatencyBenchmark(plain);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(FormatLatencyTable(*none, nullptr).find("Speculative decoding"), std::string::npos);
  EXPECT_FALSE(LatencyJson(*none, nullptr)["results"][0].contains("speculation"));
  EXPECT_EQ(none->rows[0].spec.verifications, 0);
}

// A mixture's decode step reads all but the experts, and of these the share
// its batch is expected to choose.
TEST(ModelFigures, ExpertBytesCountByTheShareChosen) {
  ModelFigures f;
  f.weight_bytes = 1000;
  f.expert_bytes = 800;
  f.experts_per_token_share = 0.25;
  EXPECT_DOUBLE_EQ(f.WeightBytesPerStep(1), 200 + 800 * 0.25);
  EXPECT_DOUBLE_EQ(f.WeightBytesPerStep(2), 200 + 800 * (1 - 0.75 * 0.75));
  f.expert_bytes = 0;  // a dense model: every byte every step
  f.experts_per_token_share = 0;
  EXPECT_DOUBLE_EQ(f.WeightBytesPerStep(4), 1000);
}

TEST(LatencyBenchmark, RejectsBadSettings) {
  LatencyOptions o = Tiny();
  o.batch_sizes = {0};
  EXPECT_EQ(RunLatencyBenchmark(o).status().code(), StatusCode::kInvalidArgument);
  o = Tiny();
  o.input_len = 0;
  EXPECT_FALSE(RunLatencyBenchmark(o).ok());
  o = Tiny();
  o.runs = 0;
  EXPECT_FALSE(RunLatencyBenchmark(o).ok());
  o = Tiny();
  o.input_len = 4000;  // beyond tiny-qwen2's 1024 positions
  auto beyond = RunLatencyBenchmark(o);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("context"), std::string::npos) << beyond.status().ToString();
  o = Tiny();
  o.engine.max_model_len = 20;
  EXPECT_FALSE(RunLatencyBenchmark(o).ok());
  o = Tiny();
  o.temperature = -1;
  EXPECT_FALSE(RunLatencyBenchmark(o).ok());
}

}  // namespace latency_benchmark_tests
}  // namespace kiln::bench
