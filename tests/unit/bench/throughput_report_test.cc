// The throughput mode's output on synthetic rows, and the weight
// arithmetic the compute peak is chosen by.
#include "bench/throughput_report.h"

#include <gtest/gtest.h>

#include "bench/model_figures.h"

namespace kiln::bench {
namespace throughput_report_tests {

ThroughputReport Sample() {
  ThroughputReport report;
  report.model = "qwen2.5-0.5b shapes, generated bf16 weights";
  report.arithmetic = WeightArithmetic::kBf16;
  for (int32_t seqs : {1, 4}) {
    ThroughputRow r;
    r.max_num_seqs = seqs;
    r.requests = 8;
    r.prompt_tokens = 1000;
    r.output_tokens = 500;
    r.seconds = 10.0 / seqs;
    r.output_tokens_per_s = 500 / r.seconds;
    r.total_tokens_per_s = 1500 / r.seconds;
    r.prefill_tokens_computed = 1000;
    r.decode_tokens_computed = 492;
    r.prefill_seconds = 4.0 / seqs;
    r.decode_seconds = 6.0 / seqs;
    r.flops_per_s = 20e9 * seqs;
    r.threads = 2;
    report.rows.push_back(r);
    ContentionReading c;
    c.valid = true;
    c.other_cores = seqs == 1 ? 0.0 : 0.5;
    report.contention.push_back(c);
  }
  return report;
}

TEST(ThroughputReport, RatesOfEachKindOfPass) {
  ThroughputReport report = Sample();
  EXPECT_DOUBLE_EQ(DecodeTokensPerSecond(report.rows[0]), 492 / 6.0);
  EXPECT_DOUBLE_EQ(PrefillTokensPerSecond(report.rows[0]), 1000 / 4.0);
  EXPECT_EQ(DecodeTokensPerSecond(ThroughputRow{}), 0);
  EXPECT_EQ(PrefillTokensPerSecond(ThroughputRow{}), 0);
}

TEST(ThroughputReport, TableAndJson) {
  ThroughputReport report = Sample();
  RooflineRow roof;
  roof.threads = 2;
  ComputeFigure fma;
  fma.name = "fp32_fma";
  fma.per_second = 100e9;
  roof.compute = {fma};
  const std::string table = FormatThroughputReport(report, &roof);
  EXPECT_NE(table.find("decode tok/s"), std::string::npos);
  EXPECT_NE(table.find("20%"), std::string::npos);  // 20 of 100 GFLOP/s
  EXPECT_NE(table.find("(contended: 50% of a core used by other processes)"), std::string::npos);
  EXPECT_NE(table.find("At max-num-seqs 1 decode runs at 82.0 tokens/s"), std::string::npos);
  EXPECT_NE(table.find("compute peak for bf16 weights"), std::string::npos);
  EXPECT_NE(FormatThroughputReport(report, nullptr).find("fractions not shown"), std::string::npos);

  nlohmann::json j = ThroughputJson(report, &roof);
  EXPECT_EQ(j["mode"], "throughput");
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["results"][0]["decode_tokens_per_s"].get<double>(), 492 / 6.0);
  EXPECT_DOUBLE_EQ(j["results"][1]["fraction_of_compute_peak"].get<double>(), 0.8);
  EXPECT_FALSE(j["results"][0]["contention"]["contended"].get<bool>());
  EXPECT_TRUE(j["results"][1]["contention"]["contended"].get<bool>());
  EXPECT_EQ(j["compute_peak"]["arithmetic"], "bf16");
}

TEST(WeightArithmetic, FromLayoutsAndDTypes) {
  EXPECT_EQ(ArithmeticOfLayout("panel16-bf16"), WeightArithmetic::kBf16);
  EXPECT_EQ(ArithmeticOfLayout("panel16-f16"), WeightArithmetic::kF16);
  EXPECT_EQ(ArithmeticOfLayout("panel16-f32"), WeightArithmetic::kFp32);
  EXPECT_EQ(ArithmeticOfLayout("Q8_0-rows"), WeightArithmetic::kInt8);
  EXPECT_EQ(ArithmeticOfLayout("model-q4_0.gguf"), WeightArithmetic::kInt8);
  EXPECT_EQ(ArithmeticOfDType(DType::kQ4_K), WeightArithmetic::kInt8);
  EXPECT_EQ(ArithmeticOfDType(DType::kBF16), WeightArithmetic::kBf16);
  EXPECT_EQ(ArithmeticOfDType(DType::kF16), WeightArithmetic::kF16);
  EXPECT_EQ(ArithmeticOfDType(DType::kF32), WeightArithmetic::kFp32);
}

}  // namespace throughput_report_tests
}  // namespace kiln::bench
