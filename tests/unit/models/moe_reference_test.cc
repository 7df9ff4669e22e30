// Mixtures of experts (Qwen3-MoE, Mixtral, Qwen2-MoE) against an
// independent PyTorch implementation of their published definitions
// (tests/tools/moe_reference.py): routing by softmax and top-k with or
// without renormalization, Qwen2-MoE's sigmoid-gated shared expert and its
// dense layer; from the Hugging Face folder and from GGUF files of the same
// weights in llama.cpp's layout (stacked 3-D expert tensors, and older
// Mixtral files' per-expert ones), F32 and Q8_0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "model_test_util.h"
#include "testing/model_runner_for_tests.h"

namespace kiln {
namespace moe_reference_tests {

const std::string& ModelsDir() {
  static const std::string dir = testing::ReferenceScriptOutput("moe_reference.py", "qwen2_moe/reference.json");
  return dir;
}

using testing::AllLogits;
using testing::DecidedSteps;
using testing::MaxAbs;

struct Case {
  const char* variant;  // qwen3_moe, mixtral, qwen2_moe
  const char* file;     // "" for the Hugging Face folder, else a GGUF file in it
};

class MoeReference : public ::testing::TestWithParam<Case> {
 protected:
  std::string Path() const {
    std::string dir = ModelsDir() + "/" + GetParam().variant;
    return *GetParam().file == '\0' ? dir : dir + "/" + GetParam().file;
  }
  nlohmann::json Reference() const {
    return testing::LoadJson(ModelsDir() + "/" + GetParam().variant + "/reference.json");
  }
};

TEST_P(MoeReference, ConfigIsRead) {
  auto ref = Reference();
  auto w = WeightStore::Open(Path());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const ModelConfig& c = (*w)->config();
  const std::string variant = GetParam().variant;
  EXPECT_EQ(c.arch, variant == "mixtral"     ? Architecture::kMixtral
                    : variant == "qwen2_moe" ? Architecture::kQwen2Moe
                                             : Architecture::kQwen3Moe);
  EXPECT_EQ(c.num_experts, ref["experts"].get<int64_t>());
  EXPECT_EQ(c.experts_per_token, ref["top_k"].get<int64_t>());
  EXPECT_EQ(c.normalize_expert_weights, ref["normalized"].get<bool>());
  EXPECT_EQ(c.shared_expert_intermediate_size, ref["shared_width"].get<int64_t>());
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto dense = ref["dense_layers"].get<std::vector<int64_t>>();
    EXPECT_EQ(c.LayerIsMoe(l), std::find(dense.begin(), dense.end(), l) == dense.end()) << l;
  }
  // Every expert under its canonical name, whichever file held it.
  const int64_t last = c.num_experts - 1;
  EXPECT_NE((*w)->Find(weight_names::Layer(0, weight_names::ExpertSuffix(last, "down_proj"))), nullptr);
  EXPECT_NE((*w)->Find(weight_names::Layer(0, "mlp.gate.weight")), nullptr);
  EXPECT_LT(c.ActiveParameterCount(), c.ParameterCount());
}

// Logits of every position, in fp32, within 1e-4 x max(1, max |logit|) of
// the reference, whatever the chunking of the prompt and the backend.
TEST_P(MoeReference, LogitsMatchPyTorch) {
  auto ref = Reference();
  auto ids = testing::Ids(ref["input_ids"]);
  std::vector<float> expected = AllLogits(ref["logits"]);
  const float tolerance = 1e-4f * std::max(1.0f, MaxAbs(expected));
  // testaccel-mm has no moe kernel: the mixtures fall back to the CPU
  // between its matmuls.
  for (const char* backend : {"cpu", "testaccel-mm"}) {
    CompileOptions o = testing::Fp32();
    o.backend = backend;
    auto m = testing::Load(Path(), o);
    ASSERT_NE(m.model, nullptr);
    for (int64_t chunk : {1, 7, 64}) {
      testing::DirectRunner runner(*m.model, 1, 64);
      auto logits = runner.Prefill({ids}, chunk, true);
      EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), tolerance) << backend << " chunk " << chunk;
    }
  }
}

// A sequence's logits are the same bits whatever it is batched with: its
// rows meet other sequences' rows in the experts' matrix products.
TEST_P(MoeReference, BatchingChangesNoBits) {
  auto ref = Reference();
  auto ids = testing::Ids(ref["input_ids"]);
  std::vector<int32_t> other(ids.rbegin(), ids.rend());
  other.resize(13);
  auto m = testing::Load(Path(), testing::Fp32());
  ASSERT_NE(m.model, nullptr);
  testing::DirectRunner alone(*m.model, 1, 64);
  auto a = alone.Prefill({ids}, 64, true);
  testing::DirectRunner together(*m.model, 2, 64);
  auto b = together.Prefill({other, ids}, 5, true);
  ASSERT_EQ(a[0].size(), b[1].size());
  EXPECT_TRUE(a[0] == b[1]);
}

TEST_P(MoeReference, GreedyMatchesPyTorch) {
  auto ref = Reference();
  auto ids = testing::Ids(ref["input_ids"]);
  auto m = testing::Load(Path(), testing::Fp32());
  ASSERT_NE(m.model, nullptr);
  auto expected = testing::Ids(ref["greedy"]);
  const size_t decided = DecidedSteps(ref);
  EXPECT_GT(decided, expected.size() / 2);
  testing::DirectRunner runner(*m.model, 1, 64);
  auto got = runner.Greedy(ids, static_cast<int>(expected.size()));
  got.resize(std::min(got.size(), decided));
  expected.resize(decided);
  EXPECT_EQ(got, expected);
}

INSTANTIATE_TEST_SUITE_P(Variants, MoeReference,
                         ::testing::Values(Case{"qwen3_moe", ""}, Case{"mixtral", ""}, Case{"qwen2_moe", ""},
                                           Case{"qwen3_moe", "model-F32.gguf"}, Case{"mixtral", "model-F32.gguf"},
                                           Case{"qwen2_moe", "model-F32.gguf"},
                                           Case{"mixtral", "model-F32-per-expert.gguf"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const std::string file = info.param.file;
                           const char* from = file.empty()                                   ? "_hf"
                                              : file.find("per-expert") != std::string::npos ? "_gguf_per_expert"
                                                                                             : "_gguf";
                           return std::string(info.param.variant) + from;
                         });

// The Q8_0 files' experts run on their blocks: each expert's matrix is a
// run of the stacked tensor's blocks; the logits are those of the same
// weights dequantized to f32 but for the int8 rounding of the activations
// (a routing choice that rounding flips moves a position's logits more than
// the rounding itself, hence loose bounds), and near the f32 reference's.
TEST(MoeGguf, QuantizedExpertsRun) {
  for (const char* variant : {"qwen3_moe", "mixtral", "qwen2_moe"}) {
    const std::string dir = ModelsDir() + "/" + variant;
    auto hf = WeightStore::Open(dir);
    ASSERT_TRUE(hf.ok()) << hf.status().ToString();
    auto m = testing::Load(dir + "/model-Q8_0.gguf", testing::Fp32());
    ASSERT_NE(m.model, nullptr) << variant;
    const std::string name = weight_names::Layer(0, weight_names::ExpertSuffix(5, "up_proj"));
    const Weight* w = m.weights->Find(name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_EQ(w->dtype, DType::kQ8_0);
    auto expected = (*hf)->ReadF32(name);
    auto got = m.weights->ReadF32(name);
    ASSERT_TRUE(expected.ok() && got.ok()) << name;
    EXPECT_LT(testing::MaxAbsDiff(*got, *expected), 0.6f * MaxAbs(*expected) / 127) << variant;

    auto dequantized = WeightStore::Requantized(*m.weights, DType::kF32);
    ASSERT_TRUE(dequantized.ok()) << dequantized.status().ToString();
    auto f32 = CompiledModel::Compile(**dequantized, testing::Fp32());
    ASSERT_TRUE(f32.ok()) << f32.status().ToString();

    auto ref = testing::LoadJson(dir + "/reference.json");
    auto ids = testing::Ids(ref["input_ids"]);
    testing::DirectRunner runner(*m.model, 1, 64);
    auto logits = runner.Prefill({ids}, 64, true);
    testing::DirectRunner f32_runner(**f32, 1, 64);
    auto f32_logits = f32_runner.Prefill({ids}, 64, true);
    std::vector<float> reference = AllLogits(ref["logits"]);
    float rms = 0, rms_ref = 0;
    for (size_t i = 0; i < reference.size(); ++i) {
      rms += (logits[0][i] - f32_logits[0][i]) * (logits[0][i] - f32_logits[0][i]);
      rms_ref += reference[i] * reference[i];
    }
    // Well inside what a wrong expert or a misread block would do (logits
    // of the size of the reference's own).
    EXPECT_LT(std::sqrt(rms / static_cast<float>(reference.size())),
              0.05f * std::sqrt(rms_ref / static_cast<float>(reference.size())))
        << variant;
    EXPECT_LT(testing::MaxAbsDiff(logits[0], f32_logits[0]), 0.1f * MaxAbs(reference)) << variant;
    EXPECT_LT(testing::MaxAbsDiff(logits[0], reference), 0.1f * MaxAbs(reference)) << variant;
  }
}

// The same for the Q8_0 files, whose experts run on their x8 copies: a
// prompt alone (one pass of all its rows, expert by expert) and in chunks
// of 5 beside another's (few rows: the chosen experts run together) give
// the same bits.
TEST(MoeGguf, QuantizedExpertsBatchingChangesNoBits) {
  for (const char* variant : {"qwen3_moe", "mixtral", "qwen2_moe"}) {
    const std::string dir = ModelsDir() + "/" + variant;
    auto ref = testing::LoadJson(dir + "/reference.json");
    auto ids = testing::Ids(ref["input_ids"]);
    ASSERT_GE(ids.size(), 16u) << "a prompt of fewer rows would not run expert by expert";
    std::vector<int32_t> other(ids.rbegin(), ids.rend());
    other.resize(13);
    auto m = testing::Load(dir + "/model-Q8_0.gguf", testing::Fp32());
    ASSERT_NE(m.model, nullptr) << variant;
    testing::DirectRunner alone(*m.model, 1, 64);
    auto a = alone.Prefill({ids}, 64, true);
    testing::DirectRunner together(*m.model, 2, 64);
    auto b = together.Prefill({other, ids}, 5, true);
    ASSERT_EQ(a[0].size(), b[1].size()) << variant;
    EXPECT_TRUE(a[0] == b[1]) << variant;
  }
}

// Perplexity of a prompt's tokens after the first under per-position logits
// (vocab floats each).
double Perplexity(const std::vector<float>& logits, const std::vector<int32_t>& ids, size_t vocab) {
  double nll = 0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = logits.data() + t * vocab;
    const double max = *std::max_element(row, row + vocab);
    double sum = 0;
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
    nll -= static_cast<double>(row[static_cast<size_t>(ids[t + 1])]) - max - std::log(sum);
  }
  return std::exp(nll / static_cast<double>(ids.size() - 1));
}

// The GGUF files against llama.cpp itself (node-llama-cpp, which
// scripts/setup.sh installs into tests/llamacpp_oracle) with an f32 KV
// cache: every position's logits within 1e-4 x max(1, max |logit|), and the
// prompt's perplexity within 0.1%. Qwen2-MoE as its all-sparse variant:
// llama.cpp's qwen2moe has no dense layers.
TEST(MoeLlamaCpp, GgufLogitsMatchLlamaCpp) {
  const std::string oracle = testing::SourceDir() + "/tests/llamacpp_oracle";
  if (!std::filesystem::exists(oracle + "/node_modules/node-llama-cpp") ||
      std::system("node --version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "node-llama-cpp is not installed in tests/llamacpp_oracle (scripts/setup.sh installs it)";
  }
  for (const char* variant : {"qwen3_moe", "mixtral", "qwen2_moe_sparse"}) {
    const std::string dir = ModelsDir() + "/" + variant;
    const std::string out = testing::MakeTempDir() + "/llamacpp.json";
    const std::string cmd = "cd " + oracle + " && node logits.mjs " + dir + "/model-F32.gguf " + dir +
                            "/reference.json 256 > " + out;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<float> expected = AllLogits(testing::LoadJson(out)["logits"]);
    auto ref = testing::LoadJson(dir + "/reference.json");
    auto ids = testing::Ids(ref["input_ids"]);

    auto m = testing::Load(dir + "/model-F32.gguf", testing::Fp32());
    ASSERT_NE(m.model, nullptr);
    testing::DirectRunner runner(*m.model, 1, 64);
    auto logits = runner.Prefill({ids}, 64, true);
    EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), 1e-4f * std::max(1.0f, MaxAbs(expected))) << variant;
    const size_t vocab = static_cast<size_t>(ref["vocab_size"].get<int64_t>());
    ASSERT_EQ(logits[0].size(), ids.size() * vocab);
    const double ours = Perplexity(logits[0], ids, vocab), theirs = Perplexity(expected, ids, vocab);
    EXPECT_LT(std::fabs(ours / theirs - 1), 1e-3) << variant << ": " << ours << " vs " << theirs;
  }
}

// The GGUF architecture name of a variant.
const char* GgufArch(const std::string& variant) {
  return variant == "mixtral" ? "llama" : variant == "qwen2_moe" ? "qwen2moe" : "qwen3moe";
}

// kiln quantize writes a mixture in llama.cpp's layout. From the Hugging
// Face folder at f32: every tensor of the script's llama.cpp-layout file
// (experts stacked 3-D, Qwen2-MoE's shared-expert gate a vector, Mixtral's
// q/k rows permuted) bit for bit and no other, with its architecture's
// keys, and the file runs as the PyTorch reference does. From that GGUF
// file at Q8_0: the script's Q8_0 file, bit for bit. From older Mixtral
// files' per-expert tensors: the stacked file.
TEST(MoeQuantize, WritesLlamaCppsLayout) {
  for (const char* variant : {"qwen3_moe", "mixtral", "qwen2_moe"}) {
    const std::string dir = ModelsDir() + "/" + variant;
    const std::string out = testing::MakeTempDir();
    std::string log;
    ASSERT_EQ(testing::KilnQuantize(dir, out + "/f32.gguf", "f32", &log), 0) << log;
    testing::ExpectSameTensorsAndKeys(out + "/f32.gguf", dir + "/model-F32.gguf", GgufArch(variant));

    auto ref = testing::LoadJson(dir + "/reference.json");
    std::vector<float> expected = AllLogits(ref["logits"]);
    auto m = testing::Load(out + "/f32.gguf", testing::Fp32());
    ASSERT_NE(m.model, nullptr) << variant;
    testing::DirectRunner runner(*m.model, 1, 64);
    auto logits = runner.Prefill({testing::Ids(ref["input_ids"])}, 64, true);
    EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), 1e-4f * std::max(1.0f, MaxAbs(expected))) << variant;

    ASSERT_EQ(testing::KilnQuantize(dir + "/model-F32.gguf", out + "/q8_0.gguf", "q8_0", &log), 0) << log;
    testing::ExpectSameTensorsAndKeys(out + "/q8_0.gguf", dir + "/model-Q8_0.gguf", GgufArch(variant));
  }
  const std::string dir = ModelsDir() + "/mixtral";
  const std::string out = testing::MakeTempDir() + "/stacked.gguf";
  std::string log;
  ASSERT_EQ(testing::KilnQuantize(dir + "/model-F32-per-expert.gguf", out, "f32", &log), 0) << log;
  testing::ExpectSameTensorsAndKeys(out, dir + "/model-F32.gguf", "llama");
}

// Qwen3-MoE without norm_topk_prob cannot be written: llama.cpp's qwen3moe
// always renormalizes.
TEST(MoeQuantize, RefusesWhatGgufCannotSay) {
  const std::string dir = ModelsDir() + "/qwen3_moe";
  auto text = ReadFileToString(dir + "/config.json");
  ASSERT_TRUE(text.ok());
  auto config = nlohmann::json::parse(*text);
  config["norm_topk_prob"] = false;
  const std::string bad = testing::MakeTempDir();
  for (const char* file : {"model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(dir + "/" + file, bad + "/" + file);
  }
  {
    std::ofstream(bad + "/config.json") << config.dump();
  }
  std::string log;
  EXPECT_NE(testing::KilnQuantize(bad, bad + "/out.gguf", "q8_0", &log), 0);
  EXPECT_NE(log.find("norm_topk_prob"), std::string::npos) << log;
}

// A router whose expert count is not the config's is named.
TEST(MoeConfig, RouterOfAnotherExpertCountIsNamed) {
  const std::string dir = ModelsDir() + "/qwen3_moe";
  auto text = ReadFileToString(dir + "/config.json");
  ASSERT_TRUE(text.ok());
  auto config = nlohmann::json::parse(*text);
  config["num_experts"] = 6;
  const std::string bad = testing::MakeTempDir();
  std::filesystem::copy_file(dir + "/model.safetensors", bad + "/model.safetensors");
  {
    std::ofstream(bad + "/config.json") << config.dump();
  }
  auto w = WeightStore::Open(bad);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().ToString().find("mlp.gate.weight"), std::string::npos) << w.status().ToString();
}

}  // namespace moe_reference_tests
}  // namespace kiln
