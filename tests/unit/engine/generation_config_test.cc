// generation_config.json: end-of-sequence ids and default sampling.
#include "engine/generation_config.h"

#include <gtest/gtest.h>

#include "testing/test_paths.h"

namespace kiln {
namespace generation_config_tests {

TEST(GenerationConfigTest, ReadsEosIdsAsNumberOrList) {
  auto one = ParseGenerationConfig(R"({"eos_token_id": 7})", "g.json");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->eos_token_ids, std::vector<int32_t>{7});
  auto list = ParseGenerationConfig(R"({"eos_token_id": [151645, 151643]})", "g.json");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
}

TEST(GenerationConfigTest, SamplingDefaultsFollowDoSample) {
  auto greedy =
      ParseGenerationConfig(R"({"do_sample": false, "temperature": 0.7, "max_new_tokens": 64})", "g");
  ASSERT_TRUE(greedy.ok());
  EXPECT_EQ(greedy->DefaultSamplingParams().temperature, 0);
  EXPECT_EQ(greedy->DefaultSamplingParams().max_tokens, 64);
  auto qwen = ParseGenerationConfig(
      R"({"do_sample": true, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05})",
      "g");
  ASSERT_TRUE(qwen.ok());
  SamplingParams p = qwen->DefaultSamplingParams();
  EXPECT_DOUBLE_EQ(p.temperature, 0.7);
  EXPECT_DOUBLE_EQ(p.top_p, 0.8);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.05);
}

TEST(GenerationConfigTest, ErrorsNameTheFileAndField) {
  auto bad = ParseGenerationConfig(R"({"eos_token_id": "two"})", "generation_config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("generation_config.json"), std::string::npos);
  EXPECT_NE(bad.status().message().find("eos_token_id"), std::string::npos);
  auto bad_temp = ParseGenerationConfig(R"({"temperature": "hot"})", "g.json");
  ASSERT_FALSE(bad_temp.ok());
  EXPECT_NE(bad_temp.status().message().find("temperature"), std::string::npos);
  EXPECT_FALSE(ParseGenerationConfig("[1, 2]", "g.json").ok());
  EXPECT_FALSE(ParseGenerationConfig("{", "g.json").ok());
}

TEST(GenerationConfigTest, ReadsTheTinyModelsFiles) {
  auto llama = ReadGenerationConfig(testing::ModelDir("tiny-llama") + "/generation_config.json");
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(llama->DefaultSamplingParams().temperature, 0);
  auto missing = ReadGenerationConfig(testing::ModelDir("tiny-llama") + "/no_such_file.json");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->eos_token_ids.empty());
}

}  // namespace generation_config_tests
}  // namespace kiln
