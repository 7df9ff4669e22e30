// The three tiny models against the independent PyTorch reference in
// ../shared/models/*/reference: logits, greedy continuations and held-out
// perplexity, in fp32; and the GGUF conversions of the same weights.
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_util.h"
#include "testing/model_runner_for_tests.h"

namespace kiln {
namespace reference_tests {

using testing::DirectRunner;

class TinyModel : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyModel, LogitsMatchReference) {
  std::string dir = testing::ModelDir(GetParam());
  auto m = testing::Load(dir, testing::Fp32());
  ASSERT_NE(m.model, nullptr);
  DirectRunner runner(*m.model, 1, 1024);
  const int64_t vocab = m.model->config().vocab_size;
  for (int i = 0; i < 4; ++i) {
    auto ref = testing::LoadJson(dir + "/reference/prompt_" + std::to_string(i) + ".json");
    auto ids = testing::Ids(ref["input_ids"]);
    bool all = !ref["all_logits"].is_null();
    auto logits = runner.Prefill({ids}, 1 << 20, all);
    ASSERT_EQ(logits.size(), 1u);
    std::vector<float> last(logits[0].end() - vocab, logits[0].end());
    EXPECT_LT(testing::MaxAbsDiff(last, testing::Floats(ref["last_logits"])), 1e-4f) << "prompt " << i;
    if (all) {
      std::vector<float> expected;
      for (const auto& row : ref["all_logits"]) {
        auto r = testing::Floats(row);
        expected.insert(expected.end(), r.begin(), r.end());
      }
      EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), 1e-4f) << "prompt " << i << " all positions";
    }
  }
}

TEST_P(TinyModel, GreedyContinuationMatchesReference) {
  std::string dir = testing::ModelDir(GetParam());
  auto m = testing::Load(dir, testing::Fp32());
  ASSERT_NE(m.model, nullptr);
  for (int i = 0; i < 4; ++i) {
    DirectRunner runner(*m.model, 1, 1024);
    auto ref = testing::LoadJson(dir + "/reference/prompt_" + std::to_string(i) + ".json");
    auto expected = testing::Ids(ref["greedy"]["new_ids"]);
    auto got = runner.Greedy(testing::Ids(ref["input_ids"]), static_cast<int>(expected.size()));
    EXPECT_EQ(got, expected) << GetParam() << " prompt " << i;
  }
}

TEST_P(TinyModel, HeldOutPerplexityMatchesReference) {
  std::string dir = testing::ModelDir(GetParam());
  auto m = testing::Load(dir, testing::Fp32());
  ASSERT_NE(m.model, nullptr);
  auto ref = testing::LoadJson(dir + "/reference/heldout_ppl.json");
  auto ids = testing::Ids(ref["token_ids"]);
  const int64_t window = ref["window"].get<int64_t>();
  const int64_t windows = ref["n_windows"].get<int64_t>();
  const int64_t vocab = m.model->config().vocab_size;
  DirectRunner runner(*m.model, 1, window);
  double nll = 0;
  int64_t count = 0;
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<int32_t> chunk(ids.begin() + w * window, ids.begin() + (w + 1) * window);
    auto logits = runner.Prefill({chunk}, window, true);
    ASSERT_EQ(logits[0].size(), static_cast<size_t>(window * vocab));
    for (int64_t t = 0; t + 1 < window; ++t) {
      const float* row = logits[0].data() + t * vocab;
      double mx = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
      nll += mx + std::log(sum) - row[chunk[static_cast<size_t>(t + 1)]];
      ++count;
    }
  }
  double ppl = std::exp(nll / static_cast<double>(count));
  double expected = ref["perplexity"].get<double>();
  EXPECT_EQ(count, ref["n_predictions"].get<int64_t>());
  EXPECT_LT(std::fabs(ppl - expected) / expected, 5e-4) << "perplexity " << ppl << " vs " << expected;
}

INSTANTIATE_TEST_SUITE_P(Models, TinyModel, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"));

// The unquantized GGUF files (written by llama.cpp's tools; llama's q/k rows
// permuted for interleaved RoPE) continue the prompts as the reference does.
class TinyGguf : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(TinyGguf, GreedyMatchesGoldens) {
  auto [model, file] = GetParam();
  std::string path = testing::SharedDir() + "/models/gguf/" + file;
  auto m = testing::Load(path, testing::Fp32());
  ASSERT_NE(m.model, nullptr);
  auto goldens = testing::LoadJson(testing::SharedDir() + "/models/gguf/goldens.json");
  const auto& prompts = goldens["files"][file]["prompts"];
  ASSERT_EQ(prompts.size(), 4u);
  for (const auto& p : prompts) {
    DirectRunner runner(*m.model, 1, 1024);
    auto expected = testing::Ids(p["greedy_ids"]);
    auto got = runner.Greedy(testing::Ids(p["input_ids"]), static_cast<int>(expected.size()));
    EXPECT_EQ(got, expected) << file << " prompt " << p["prompt_index"];
  }
}

INSTANTIATE_TEST_SUITE_P(Files, TinyGguf,
                         ::testing::Values(std::make_pair("tiny-llama", "tiny-llama-F32.gguf"),
                                           std::make_pair("tiny-qwen2", "tiny-qwen2-F32.gguf"),
                                           std::make_pair("tiny-qwen3", "tiny-qwen3-F16.gguf")));

}  // namespace reference_tests
}  // namespace kiln
