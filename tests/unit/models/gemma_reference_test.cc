// Gemma 2 and Gemma 3 (text) against an independent PyTorch implementation
// of the published architectures (tests/tools/gemma_reference.py): a small
// model with both kinds of layers and a window shorter than the prompt,
// through the paged kernel and the decomposed path, prefilled in chunks of
// several sizes; then greedy continuation. The same weights written as GGUF
// with llama.cpp's names and conventions (norms stored as 1 + w) load to the
// same results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "format/gguf.h"
#include "model_test_util.h"
#include "testing/model_runner_for_tests.h"

namespace kiln {
namespace gemma_reference_tests {

std::string MakeModel(const std::string& arch, const std::string& variant = "") {
  std::string dir = testing::MakeTempDir();
  std::string cmd = "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 /usr/bin/python3 " + testing::SourceDir() +
                    "/tests/tools/gemma_reference.py " + dir + " " + arch + " " + variant;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// Writes the model in `dir` as dir/model.gguf the way llama.cpp's converter
// does (tests/tools/gemma_to_gguf.py): its tensor names and keys, the norms'
// weights stored as 1 + w.
std::string WriteGguf(const std::string& dir, const std::string& arch) {
  std::string cmd = "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 /usr/bin/python3 " + testing::SourceDir() +
                    "/tests/tools/gemma_to_gguf.py " + dir + " " + arch;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir + "/model.gguf";
}

void CheckAgainstReference(const std::string& arch, Architecture expected_arch, const std::string& variant = "",
                           bool from_gguf = false) {
  std::string dir = MakeModel(arch, variant);
  const std::string model_path = from_gguf ? WriteGguf(dir, arch) : dir;
  auto ref = testing::LoadJson(dir + "/reference.json");
  auto ids = testing::Ids(ref["input_ids"]);
  std::vector<float> expected;
  for (const auto& row : ref["logits"]) {
    auto r = testing::Floats(row);
    expected.insert(expected.end(), r.begin(), r.end());
  }
  float largest = 1.0f;
  for (float v : expected) largest = std::max(largest, std::fabs(v));
  const float tolerance = 1e-4f * largest;
  const auto greedy = ref["greedy"].get<std::vector<int32_t>>();
  const auto margins = ref["margins"].get<std::vector<double>>();
  // Tokens are compared up to the first step whose top two logits are too
  // close to tell apart at the logits' tolerance.
  size_t decided = 0;
  while (decided < margins.size() && margins[decided] > 3e-3) ++decided;
  ASSERT_GT(decided, 0u) << "the reference's first step is a near tie";

  for (const char* backend : {"cpu", "testaccel-mm"}) {
    CompileOptions o = testing::Fp32();
    o.backend = backend;
    auto m = testing::Load(model_path, o);
    ASSERT_NE(m.model, nullptr);
    const ModelConfig& c = m.model->config();
    EXPECT_EQ(c.arch, expected_arch);
    EXPECT_EQ(m.weights->format(), from_gguf ? ModelFormat::kGguf : ModelFormat::kHuggingFace);
    EXPECT_EQ(c.sliding_window, ref["window"].get<int64_t>());
    for (int64_t chunk : {1, 4, 64}) {
      testing::DirectRunner runner(*m.model, 1, 64);
      auto logits = runner.Prefill({ids}, chunk, true);
      EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), tolerance) << backend << " chunk " << chunk;
    }
    testing::DirectRunner runner(*m.model, 1, 64);
    auto tokens = runner.Greedy(ids, static_cast<int>(greedy.size()));
    ASSERT_EQ(tokens.size(), greedy.size());
    for (size_t i = 0; i < decided; ++i) EXPECT_EQ(tokens[i], greedy[i]) << backend << " step " << i;
  }
}

TEST(GemmaReference, Gemma3LogitsAndGreedyMatchPyTorch) {
  CheckAgainstReference("gemma3", Architecture::kGemma3);
}

TEST(GemmaReference, Gemma2LogitsAndGreedyMatchPyTorch) {
  CheckAgainstReference("gemma2", Architecture::kGemma2);
}

TEST(GemmaReference, Gemma3FromGgufMatchesPyTorch) {
  CheckAgainstReference("gemma3", Architecture::kGemma3, "llama.cpp", true);
}

TEST(GemmaReference, Gemma2FromGgufMatchesPyTorch) {
  CheckAgainstReference("gemma2", Architecture::kGemma2, "llama.cpp", true);
}

// kiln quantize writes a Gemma folder in llama.cpp's layout: at f32, every
// tensor of the llama.cpp-layout file of the same weights (norms stored as
// 1 + w) bit for bit, and its architecture keys with the same values; the
// file runs as the PyTorch reference does.
TEST(GemmaReference, QuantizeWritesLlamaCppsLayout) {
  for (const char* arch : {"gemma2", "gemma3"}) {
    std::string dir = MakeModel(arch, "llama.cpp");
    std::string log;
    ASSERT_EQ(testing::KilnQuantize(dir, dir + "/kiln.gguf", "f32", &log), 0) << log;
    testing::ExpectSameTensorsAndKeys(dir + "/kiln.gguf", WriteGguf(dir, arch), arch);
    auto ref = testing::LoadJson(dir + "/reference.json");
    std::vector<float> expected;
    for (const auto& row : ref["logits"]) {
      auto r = testing::Floats(row);
      expected.insert(expected.end(), r.begin(), r.end());
    }
    float largest = 1.0f;
    for (float v : expected) largest = std::max(largest, std::fabs(v));
    auto m = testing::Load(dir + "/kiln.gguf", testing::Fp32());
    ASSERT_NE(m.model, nullptr);
    testing::DirectRunner runner(*m.model, 1, 64);
    auto logits = runner.Prefill({testing::Ids(ref["input_ids"])}, 64, true);
    EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), 1e-4f * largest) << arch;
  }
}

// What a Gemma GGUF file cannot state is refused, not written wrong: here
// a query_pre_attn_scalar other than the head size llama.cpp implies.
TEST(GemmaReference, QuantizeRefusesWhatGgufCannotSay) {
  std::string dir = MakeModel("gemma2");
  std::string log;
  EXPECT_NE(testing::KilnQuantize(dir, dir + "/kiln.gguf", "q8_0", &log), 0);
  EXPECT_NE(log.find("query_pre_attn_scalar"), std::string::npos) << log;
}

// Gemma3ForConditionalGeneration folders (gemma-3-4b and larger): the text
// config under text_config with the class's defaults left out, the tensors
// under the wrapper's prefix in both of its spellings, a vision tower that is
// not loaded.
TEST(GemmaReference, Gemma3OfAMultimodalCheckpointMatchesPyTorch) {
  CheckAgainstReference("gemma3", Architecture::kGemma3, "multimodal");
  auto w = WeightStore::Open(MakeModel("gemma3", "multimodal-new"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->config().hf_architecture, "Gemma3ForConditionalGeneration");
  EXPECT_TRUE((*w)->config().text_tower_of_multimodal);
  EXPECT_NE((*w)->Find("model.layers.0.self_attn.q_norm.weight"), nullptr);
  for (const Weight& weight : (*w)->weights()) EXPECT_EQ(weight.name.find("vision"), std::string::npos);
}

TEST(GemmaReference, Gemma3LayerKindsAndRopeBases) {
  auto w = WeightStore::Open(MakeModel("gemma3"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const ModelConfig& c = (*w)->config();
  EXPECT_TRUE(c.gemma_norms);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.activation, Activation::kGeluTanh);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    EXPECT_EQ(c.LayerSlides(l), (l + 1) % 3 != 0) << l;
    EXPECT_EQ(c.LayerRopeTheta(l), c.LayerSlides(l) ? 10000.0 : 1000000.0) << l;
  }
  EXPECT_DOUBLE_EQ(c.AttentionScale(), 1.0 / std::sqrt(24.0));
  EXPECT_EQ(c.attn_logit_softcap, 0.0);
  EXPECT_EQ(c.final_logit_softcap, 0.0);
}

}  // namespace gemma_reference_tests
}  // namespace kiln
