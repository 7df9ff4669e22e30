// The tiny models' tokenizers against their golden references (prompt ids,
// held-out ids, decoded generations) for every file form.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace tiny_models_tests {

struct ModelCase {
  const char* model;  // folder under models/
  const char* file;   // tokenizer file in it; "" for the folder's preference
  const char* label;
};

class TinyModelTokenizerTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    const ModelCase& c = GetParam();
    std::string path = ModelDir(c.model);
    if (*c.file != '\0') path += std::string("/") + c.file;
    tokenizer_ = LoadTokenizerOrFail(path);
    ASSERT_NE(tokenizer_, nullptr);
  }
  nlohmann::json Reference(const std::string& file) const {
    return nlohmann::json::parse(ReadTestFile(ModelDir(GetParam().model) + "/reference/" + file));
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(TinyModelTokenizerTest, PromptsEncodeToReferenceIds) {
  for (int i = 0; i < 4; ++i) {
    nlohmann::json prompt = Reference("prompt_" + std::to_string(i) + ".json");
    auto expected = prompt["input_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> ids = tokenizer_->Encode(prompt["prompt"].get<std::string>());
    EXPECT_EQ(IdsToString(ids), IdsToString(expected)) << "prompt " << i;
    EXPECT_EQ(tokenizer_->add_bos(), prompt["add_bos"].get<bool>());
  }
}

TEST_P(TinyModelTokenizerTest, GreedyOutputsDecodeToReferenceText) {
  for (int i = 0; i < 4; ++i) {
    nlohmann::json prompt = Reference("prompt_" + std::to_string(i) + ".json");
    const nlohmann::json& greedy = prompt["greedy"];
    auto new_ids = greedy["new_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer_->Decode(new_ids), greedy["decoded_new"].get<std::string>()) << "prompt " << i;
    ExpectStreamingMatchesDecode(*tokenizer_, new_ids);
    ExpectStreamingMatchesDecode(*tokenizer_, new_ids, /*skip_special=*/false);

    auto full = prompt["input_ids"].get<std::vector<int32_t>>();
    if (prompt["add_bos"].get<bool>()) full.erase(full.begin());
    full.insert(full.end(), new_ids.begin(), new_ids.end());
    EXPECT_EQ(tokenizer_->Decode(full), greedy["decoded_full"].get<std::string>()) << "prompt " << i;
  }
}

TEST_P(TinyModelTokenizerTest, HeldOutTextEncodesToReferenceIds) {
  nlohmann::json heldout = Reference("heldout_ppl.json");
  std::string text = ReadTestFile(SharedDir() + "/data/text/heldout.txt");
  auto expected = heldout["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(expected.size(), 16384u);
  std::vector<int32_t> ids = tokenizer_->Encode(text);
  ASSERT_GE(ids.size(), expected.size());
  ids.resize(expected.size());
  EXPECT_EQ(ids, expected);
}

TEST_P(TinyModelTokenizerTest, HeldOutTextRoundTrips) {
  std::string text = ReadTestFile(SharedDir() + "/data/text/heldout.txt");
  std::vector<int32_t> ids = tokenizer_->Encode(text, /*add_special=*/false);
  EXPECT_EQ(tokenizer_->Decode(ids), text);
  ExpectStreamingMatchesDecode(*tokenizer_, ids);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TinyModelTokenizerTest,
    ::testing::Values(ModelCase{"tiny-llama", "", "tiny_llama_tokenizer_json"},
                      ModelCase{"tiny-llama", "tokenizer.model", "tiny_llama_sentencepiece"},
                      ModelCase{"tiny-qwen2", "", "tiny_qwen2_tokenizer_json"},
                      ModelCase{"tiny-qwen2", "vocab.json", "tiny_qwen2_vocab_merges"},
                      ModelCase{"tiny-qwen3", "", "tiny_qwen3_tokenizer_json"},
                      ModelCase{"tiny-qwen3", "vocab.json", "tiny_qwen3_vocab_merges"}),
    [](const ::testing::TestParamInfo<ModelCase>& info) { return std::string(info.param.label); });

}  // namespace tiny_models_tests
}  // namespace kiln::testing
