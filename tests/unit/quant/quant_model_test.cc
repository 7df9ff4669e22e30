// The GGUF files of ../shared/models/gguf run natively: their block-quantized
// matrices are read in place (no dequantized copy), the results are
// deterministic (threads, batching, chunked prefill), and greedy decoding
// follows the goldens' ids as far as the README says it can be expected to.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/kernels/isa.h"
#include "compiler/compiled_model.h"
#include "core/mapped_file.h"
#include "format/weight_store.h"
#include "testing/model_runner_for_tests.h"
#include "testing/test_paths.h"

namespace kiln {
namespace quant_model_tests {

using testing::DirectRunner;

std::string GgufDir() { return testing::SharedDir() + "/models/gguf"; }

const nlohmann::json& Goldens() {
  static const nlohmann::json goldens = [] {
    auto text = ReadFileToString(GgufDir() + "/goldens.json");
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json::object();
  }();
  return goldens;
}

struct Model {
  std::unique_ptr<WeightStore> weights;
  std::unique_ptr<CompiledModel> compiled;
};

Model Load(const std::string& file, int threads, DType kv = DType::kF32) {
  Model m;
  auto w = WeightStore::Open(GgufDir() + "/" + file);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return m;
  m.weights = std::move(w).value();
  CompileOptions o;
  o.precision = Precision::kFp32;
  o.threads = threads;
  o.kv_dtype = kv;
  auto c = CompiledModel::Compile(*m.weights, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (c.ok()) m.compiled = std::move(c).value();
  return m;
}

std::vector<std::vector<int32_t>> Prompts(const std::string& file) {
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : Goldens()["files"][file]["prompts"]) prompts.push_back(p["input_ids"].get<std::vector<int32_t>>());
  return prompts;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Between them, these files hold every block type the kernels run.
const std::vector<std::string>& MixedFiles() {
  static const std::vector<std::string> files = {
      "tiny-llama-Q4_0.gguf",  "tiny-llama-Q5_K_M.gguf", "tiny-llama-Q4_K_M.gguf", "tiny-qwen2-Q5_K_M.gguf",
      "tiny-qwen3-Q4_K_M.gguf", "tiny-qwen3-Q3_K_M.gguf", "tiny-qwen3-Q2_K.gguf",   "tiny-qwen3-Q4_1.gguf",
      "tiny-qwen3-Q5_K_M.gguf"};
  return files;
}

// Matrices of every block type these files hold (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0 and Q2_K to Q6_K) are repacked once into the x8 layout where the
// vector kernels run (the only copies); every other weight is read in place.
TEST(QuantizedGguf, FilesCoverEveryKernelTypeAndRunThemInPlaceOrRepacked) {
  const bool repacks = cpu::BestIsa() != cpu::Isa::kScalar;
  std::set<std::string> layouts;
  for (const std::string& file : MixedFiles()) {
    Model m = Load(file, 1);
    ASSERT_NE(m.compiled, nullptr) << file;
    const LayoutReport& layout = m.compiled->report().layout;
    size_t copied = 0;
    for (const PackedWeightInfo& p : layout.packed) {
      const bool x8 = p.layout.size() > 3 && p.layout.compare(p.layout.size() - 3, 3, "-x8") == 0;
      EXPECT_EQ(p.in_place, !x8) << file << " " << p.weight << " " << p.layout;
      if (x8) copied += p.bytes;
      layouts.insert(p.layout);
    }
    EXPECT_EQ(layout.packed_bytes, copied) << file << ": a matrix other than the repacked ones was copied";
    const std::string plan = m.compiled->report().ToString(m.compiled->graph(), false);
    EXPECT_NE(plan.find("used in place"), std::string::npos) << plan;
  }
  for (const char* t : {"q4_0", "q8_0", "q5_0", "q4_1", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"}) {
    EXPECT_TRUE(layouts.count(std::string(t) + (repacks ? "-x8" : "-rows"))) << t;
  }
}

class QuantDeterminism : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantDeterminism, SameBitsWithOneOrTwoThreads) {
  const auto prompts = Prompts(GetParam());
  Model one = Load(GetParam(), 1), two = Load(GetParam(), 2);
  ASSERT_NE(one.compiled, nullptr);
  ASSERT_NE(two.compiled, nullptr);
  DirectRunner r1(*one.compiled, 4, 512), r2(*two.compiled, 4, 512);
  auto a = r1.Prefill(prompts, 1 << 20, true);
  auto b = r2.Prefill(prompts, 1 << 20, true);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_TRUE(BitEqual(a[i], b[i])) << "prompt " << i;
}

TEST_P(QuantDeterminism, SameBitsAloneInABatchAndChunked) {
  const auto prompts = Prompts(GetParam());
  Model m = Load(GetParam(), 2);
  ASSERT_NE(m.compiled, nullptr);
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) {
    DirectRunner r(*m.compiled, 1, 512);
    alone.push_back(r.Prefill({p}, 1 << 20, true)[0]);
  }
  for (int64_t chunk : {1, 7, 64, 1 << 20}) {
    DirectRunner r(*m.compiled, 4, 512);
    auto together = r.Prefill(prompts, chunk, true);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_TRUE(BitEqual(alone[i], together[i])) << "prompt " << i << " chunk " << chunk;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, QuantDeterminism,
                         ::testing::Values("tiny-llama-Q4_0.gguf", "tiny-qwen2-Q5_K_M.gguf", "tiny-qwen3-Q4_K_M.gguf",
                                           "tiny-qwen3-Q2_K.gguf"),
                         [](const auto& info) {
                           std::string name = info.param.substr(0, info.param.size() - 5);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// Greedy ids against the goldens, per the README: exactly up to the first
// position where llama.cpp's top-1/top-2 logit gap is below 0.05 (there an
// F32 computation on the same weights may already part ways), against the
// PyTorch run on the dequantized weights (as far as it agrees with
// llama.cpp, whose gaps these are) and against llama.cpp itself, which
// quantizes activations as kiln does.
TEST(QuantizedGguf, GreedyIdsFollowTheGoldensUpToTheFirstSmallMargin) {
  int64_t compared = 0;
  for (const auto& [file, golden] : Goldens()["files"].items()) {
    if (file.find("F32") != std::string::npos || file.find("F16") != std::string::npos) continue;
    Model m = Load(file, 2);
    ASSERT_NE(m.compiled, nullptr) << file;
    const auto& torch = golden["pytorch_f32_dequantized_weights"];
    for (size_t i = 0; i < golden["prompts"].size(); ++i) {
      const auto& p = golden["prompts"][i];
      const auto prompt = p["input_ids"].get<std::vector<int32_t>>();
      const auto gaps = p["top1_minus_top2_logit"].get<std::vector<double>>();
      const auto llama = p["greedy_ids"].get<std::vector<int32_t>>();
      const auto reference = torch["greedy_ids"][i].get<std::vector<int32_t>>();
      size_t confident = 0;
      while (confident < gaps.size() && gaps[confident] >= 0.05) ++confident;
      const size_t vs_torch = std::min<size_t>(confident, torch["greedy_ids_match_llama_cpp_first_n"][i].get<size_t>());
      DirectRunner r(*m.compiled, 1, 512);
      const auto ids = r.Greedy(prompt, 32);
      ASSERT_EQ(ids.size(), 32u);
      for (size_t t = 0; t < confident; ++t) {
        ASSERT_EQ(ids[t], llama[t]) << file << " prompt " << i << " token " << t << " (llama.cpp)";
      }
      for (size_t t = 0; t < vs_torch; ++t) {
        ASSERT_EQ(ids[t], reference[t]) << file << " prompt " << i << " token " << t << " (dequantized weights)";
      }
      compared += static_cast<int64_t>(confident);
    }
  }
  RecordProperty("tokens_compared", std::to_string(compared));
  EXPECT_GT(compared, 500);  // 19 files x 4 prompts, most with long confident prefixes
}

}  // namespace quant_model_tests
}  // namespace kiln
