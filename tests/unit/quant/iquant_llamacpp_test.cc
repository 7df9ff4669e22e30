// Models whose matrices are 2- and 3-bit i-quant blocks of random bytes
// (tests/tools/iquant_model_gguf.py: a tiny Llama, hidden 256, 2 layers),
// run by kiln's quantized kernels, against llama.cpp itself (node-llama-cpp
// in tests/llamacpp_oracle, f32 KV cache) and against kiln's float path on
// the dequantized weights.
//
// Tolerance: both engines quantize the matrices' inputs to int8 in blocks
// of 256 (llama.cpp's q8_K, kiln's activation rows) and compute the same
// integer sums, so a position's logits agree to float rounding (about
// 2e-6 here), until one activation lands on a rounding tie that the two
// quantizers break differently (q8_K multiplies by -127 / max, kiln by
// 1 / (max / 127)): that position and, through the KV cache, the later
// ones then differ by up to 2e-2 of the largest logit. So: at least half the
// positions within 1e-5 x max(1, max |logit|), every logit within 4e-2 x
// that. Against the dequantized float model the int8 activations alone
// differ, by up to 4% of the largest logit: 1e-1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/quantize_test_util.h"

namespace kiln {
namespace iquant_llamacpp_tests {

bool LlamaCppInstalled() {
  return std::filesystem::exists(testing::SourceDir() + "/tests/llamacpp_oracle/node_modules/node-llama-cpp") &&
         std::system("node --version > /dev/null 2>&1") == 0;
}

const std::vector<int32_t> kIds = {1, 50, 300, 7, 900, 1500, 22, 3, 44, 1000, 2000, 5, 6, 7, 8, 9};
constexpr int64_t kVocab = 2048;

std::vector<float> Flatten(const nlohmann::json& rows) {
  std::vector<float> out;
  for (const auto& row : rows) {
    for (const auto& v : row) out.push_back(v.get<float>());
  }
  return out;
}

float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::vector<float> KilnLogits(const WeightStore& weights) {
  auto model = CompiledModel::Compile(weights, testing::Fp32Options());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  testing::DirectRunner runner(**model, 1, 64);
  return runner.Prefill({kIds}, 64, true)[0];
}

class IQuantModel : public ::testing::TestWithParam<const char*> {};

TEST_P(IQuantModel, LogitsMatchLlamaCppAndTheDequantizedModel) {
  const std::string type = GetParam();
  const std::string dir = testing::MakeTempDir();
  const std::string gguf = dir + "/" + type + ".gguf";
  const std::string write = "/usr/bin/python3 " + testing::SourceDir() + "/tests/tools/iquant_model_gguf.py " +
                            testing::GgufPath("tiny-llama-F32.gguf") + " " + type + " " + gguf + " 1";
  ASSERT_EQ(std::system(write.c_str()), 0) << write;

  auto weights = WeightStore::Open(gguf);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  int of_type = 0;
  for (const Weight& w : (*weights)->weights()) of_type += w.dtype == *DTypeFromName(type) ? 1 : 0;
  EXPECT_EQ(of_type, 14);  // 7 matrices in each of 2 layers
  const std::vector<float> mine = KilnLogits(**weights);
  ASSERT_EQ(mine.size(), kIds.size() * kVocab);

  const std::vector<float> widened = KilnLogits(*testing::WidenedWeights::Of(**weights));
  EXPECT_LT(MaxAbsDiff(mine, widened), 1e-1f * std::max(1.0f, MaxAbs(widened))) << type;

  if (!LlamaCppInstalled()) {
    GTEST_SKIP() << "node-llama-cpp is not installed in tests/llamacpp_oracle (scripts/setup.sh installs it)";
  }
  nlohmann::json ids = {{"input_ids", kIds}, {"vocab_size", kVocab}};
  std::ofstream(dir + "/ids.json") << ids.dump();
  const std::string run = "cd " + testing::SourceDir() + "/tests/llamacpp_oracle && node logits.mjs " + gguf + " " +
                          dir + "/ids.json 64 > " + dir + "/llamacpp.json";
  ASSERT_EQ(std::system(run.c_str()), 0) << run;
  const std::vector<float> theirs = Flatten(testing::LoadJsonFile(dir + "/llamacpp.json")["logits"]);
  ASSERT_EQ(theirs.size(), mine.size());
  const float scale = std::max(1.0f, MaxAbs(theirs));
  int exact_positions = 0;
  for (size_t t = 0; t < kIds.size(); ++t) {
    float diff = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
      const size_t at = t * kVocab + static_cast<size_t>(v);
      diff = std::max(diff, std::fabs(mine[at] - theirs[at]));
    }
    exact_positions += diff < 1e-5f * scale ? 1 : 0;
  }
  const float diff = MaxAbsDiff(mine, theirs);
  std::printf("%s: max |kiln - llama.cpp| %.3g of max |logit| %.3g; %d of %zu positions within 1e-5\n", type.c_str(),
              diff, MaxAbs(theirs), exact_positions, kIds.size());
  EXPECT_GE(exact_positions, static_cast<int>(kIds.size()) / 2) << type;
  EXPECT_LT(diff, 4e-2f * scale) << type;
}

INSTANTIATE_TEST_SUITE_P(Types, IQuantModel, ::testing::Values("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace iquant_llamacpp_tests
}  // namespace kiln
