// W8A8 on the tiny models: held-out perplexity within 1% of fp32, with
// dynamic per-token activation scales and with static scales calibrated on
// other text; results that do not depend on the batch; calibration files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "backend/cpu/w8a8/w8a8_bind.h"
#include "engine/calibration.h"
#include "testing/quantize_test_util.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace w8a8_model_tests {

CompileOptions W8A8Options(std::map<std::string, float> clips = {}) {
  CompileOptions o = testing::Fp32Options();
  o.w8a8.enabled = true;
  o.w8a8.input_clips = std::move(clips);
  return o;
}

std::unique_ptr<WeightStore> Open(const std::string& path) {
  auto w = WeightStore::Open(path);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

// Held-out token ids past the ones perplexity is measured on.
std::vector<int32_t> CalibrationIds(const std::string& model_name) {
  auto ref = testing::LoadJsonFile(testing::ModelDir(model_name) + "/reference/heldout_ppl.json");
  auto tokenizer = LoadTokenizer(testing::ModelDir(model_name));
  EXPECT_TRUE(tokenizer.ok());
  auto text = ReadFileToString(testing::SharedDir() + "/data/text/heldout.txt");
  EXPECT_TRUE(text.ok());
  auto ids = (*tokenizer)->Encode(*text, false, false);
  const auto evaluated = static_cast<size_t>(ref["n_tokens"].get<int64_t>());
  EXPECT_GT(ids.size(), evaluated + 4096);
  return std::vector<int32_t>(ids.begin() + static_cast<int64_t>(evaluated), ids.end());
}

class W8A8Model : public ::testing::TestWithParam<const char*> {};

TEST_P(W8A8Model, PerplexityWithinOnePercentOfFp32) {
  const std::string name = GetParam();
  auto weights = Open(testing::ModelDir(name));
  ASSERT_NE(weights, nullptr);
  auto fp32 = CompiledModel::Compile(*weights, testing::Fp32Options());
  auto dynamic = CompiledModel::Compile(*weights, W8A8Options());
  ASSERT_TRUE(fp32.ok() && dynamic.ok()) << dynamic.status().ToString();

  CalibrationOptions calibration;
  calibration.window = 256;
  calibration.max_tokens = 8192;
  calibration.threads = 2;
  auto clips = CalibrateActivationClips(*weights, CalibrationIds(name), calibration);
  ASSERT_TRUE(clips.ok()) << clips.status().ToString();
  // Every decoder-layer matrix has its input's clip: 7 per layer.
  EXPECT_EQ(clips->by_weight.size(), static_cast<size_t>(7 * weights->config().num_layers));
  EXPECT_EQ(clips->tokens, 8192);
  auto calibrated = CompiledModel::Compile(*weights, W8A8Options(clips->by_weight));
  ASSERT_TRUE(calibrated.ok()) << calibrated.status().ToString();

  double ppl_fp32 = testing::HeldOutPerplexity(**fp32, name);
  double ppl_dynamic = testing::HeldOutPerplexity(**dynamic, name);
  double ppl_static = testing::HeldOutPerplexity(**calibrated, name);
  std::printf("%s held-out perplexity: fp32 %.4f, w8a8 dynamic %.4f (%+.3f%%), w8a8 static p99.9 %.4f (%+.3f%%)\n",
              name.c_str(), ppl_fp32, ppl_dynamic, 100 * (ppl_dynamic / ppl_fp32 - 1), ppl_static,
              100 * (ppl_static / ppl_fp32 - 1));
  EXPECT_LT(std::fabs(ppl_dynamic / ppl_fp32 - 1), 0.01) << name;
  EXPECT_LT(std::fabs(ppl_static / ppl_fp32 - 1), 0.01) << name;
  // It is really the int8 path: different numbers from fp32.
  EXPECT_NE(ppl_dynamic, ppl_fp32);

  // The compile report names the packing.
  int w8a8_packed = 0;
  for (const PackedWeightInfo& p : (*calibrated)->report().layout.packed) {
    w8a8_packed += p.layout.find("w8a8-int8") != std::string::npos;
  }
  EXPECT_EQ(w8a8_packed, 7 * weights->config().num_layers);
}

INSTANTIATE_TEST_SUITE_P(Models, W8A8Model, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));

// Each token's activations are quantized on their own and every output is
// one exact int32 sum, so a prompt's logits do not depend on what else is
// in the batch or how the prompt is chunked.
TEST(W8A8Model, LogitsDoNotDependOnTheBatch) {
  auto weights = Open(testing::ModelDir("tiny-qwen2"));
  ASSERT_NE(weights, nullptr);
  auto model = CompiledModel::Compile(*weights, W8A8Options());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    auto ref = testing::LoadJsonFile(testing::ModelDir("tiny-qwen2") + "/reference/prompt_" + std::to_string(i) + ".json");
    prompts.push_back(ref["input_ids"].get<std::vector<int32_t>>());
  }
  testing::DirectRunner together(**model, 3, 256);
  auto batched = together.Prefill(prompts, 64, true);
  for (size_t i = 0; i < prompts.size(); ++i) {
    testing::DirectRunner alone(**model, 1, 256);
    auto single = alone.Prefill({prompts[i]}, 5, true);
    ASSERT_EQ(single[0].size(), batched[i].size());
    EXPECT_EQ(single[0], batched[i]) << "prompt " << i;
  }
}

TEST(W8A8Model, QuantizedGgufWeightsToo) {
  auto weights = Open(testing::GgufPath("tiny-qwen3-Q8_0.gguf"));
  ASSERT_NE(weights, nullptr);
  auto model = CompiledModel::Compile(*weights, W8A8Options());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto reference = Open(testing::ModelDir("tiny-qwen3"));
  auto fp32 = CompiledModel::Compile(*reference, testing::Fp32Options());
  ASSERT_TRUE(fp32.ok());
  double ppl = testing::HeldOutPerplexity(**model, "tiny-qwen3", 8);
  double ppl_fp32 = testing::HeldOutPerplexity(**fp32, "tiny-qwen3", 8);
  EXPECT_LT(std::fabs(ppl / ppl_fp32 - 1), 0.01) << ppl << " vs " << ppl_fp32;
}

TEST(W8A8Calibration, TextFileAndClipsFile) {
  auto weights = Open(testing::ModelDir("tiny-llama"));
  auto tokenizer = LoadTokenizer(testing::ModelDir("tiny-llama"));
  ASSERT_TRUE(weights != nullptr && tokenizer.ok());
  const std::string dir = testing::MakeTempDir();
  {
    std::ofstream text(dir + "/calibration.txt");
    for (int i = 0; i < 20; ++i) text << "In the beginning God created the heaven and the earth.\n";
  }
  CalibrationOptions options;
  options.window = 128;
  options.percentile = 100;
  auto clips = CalibrateFromTextFile(*weights, **tokenizer, dir + "/calibration.txt", options);
  ASSERT_TRUE(clips.ok()) << clips.status().ToString();
  EXPECT_GT(clips->tokens, 100);
  // The 100th percentile is the largest value seen; a lower one is smaller or equal.
  options.percentile = 50;
  auto median = CalibrateFromTextFile(*weights, **tokenizer, dir + "/calibration.txt", options);
  ASSERT_TRUE(median.ok());
  for (const auto& [name, clip] : clips->by_weight) {
    EXPECT_GT(clip, 0.0f) << name;
    EXPECT_LE(median->by_weight.at(name), clip) << name;
  }
  // q/k/v share their input, so their clip.
  EXPECT_EQ(clips->by_weight.at("model.layers.1.self_attn.q_proj.weight"),
            clips->by_weight.at("model.layers.1.self_attn.v_proj.weight"));

  // Saved by --w8a8-clips, read back the same.
  auto resolved = ResolveActivationClips(*weights, tokenizer->get(), dir + "/calibration.txt", dir + "/clips.json",
                                         options);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  auto read = ReadActivationClips(dir + "/clips.json");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->by_weight, *resolved);
  EXPECT_EQ(read->percentile, 50);
  auto again = ResolveActivationClips(*weights, nullptr, "", dir + "/clips.json", options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *resolved);
  auto none = ResolveActivationClips(*weights, nullptr, "", "", options);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  // Bad inputs are errors naming the file.
  {
    std::ofstream bad(dir + "/bad.json");
    bad << R"({"format": "kiln-w8a8-clips", "version": 1, "clips": {"a": -1}})";
  }
  auto bad = ReadActivationClips(dir + "/bad.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.json"), std::string::npos);
  EXPECT_FALSE(ReadActivationClips(dir + "/calibration.txt").ok());
  EXPECT_EQ(ResolveActivationClips(*weights, nullptr, dir + "/calibration.txt", "", options).status().code(),
            StatusCode::kInvalidArgument);
  options.percentile = 0;
  EXPECT_EQ(CalibrateActivationClips(*weights, {1, 2, 3}, options).status().code(), StatusCode::kInvalidArgument);
  options.percentile = 99.9;
  EXPECT_EQ(CalibrateActivationClips(*weights, {1, 99999}, options).status().code(), StatusCode::kOutOfRange);
}

TEST(W8A8Calibration, NearestRankPercentile) {
  std::vector<float> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(static_cast<float>(i));
  EXPECT_EQ(NearestRankPercentile(v, 99.9), 999.0f);
  EXPECT_EQ(NearestRankPercentile(v, 100), 1000.0f);
  EXPECT_EQ(NearestRankPercentile(v, 50), 500.0f);
  EXPECT_EQ(NearestRankPercentile({7.0f}, 0.001), 7.0f);
}

}  // namespace w8a8_model_tests
}  // namespace kiln
