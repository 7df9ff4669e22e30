// Prompt files for `kiln generate`: plain lines and JSON Lines.
#include "cli/prompt_file.h"

#include <gtest/gtest.h>

namespace kiln {
namespace prompt_file_tests {

TEST(PromptFileTest, PlainLinesAreOnePromptEach) {
  SamplingParams defaults;
  defaults.max_tokens = 9;
  auto specs = ParsePromptFile("first prompt\n\n  second one \r\nthird", "prompts.txt", defaults);
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].prompt, "first prompt");
  EXPECT_EQ((*specs)[1].prompt, "  second one");
  EXPECT_EQ((*specs)[1].line, 3);
  EXPECT_EQ((*specs)[2].params.max_tokens, 9);
}

TEST(PromptFileTest, JsonLinesCarryTheirOwnParameters) {
  SamplingParams defaults;
  defaults.temperature = 0;
  defaults.max_tokens = 5;
  const char* text =
      "{\"prompt\": \"a\\nb\", \"max_tokens\": 3, \"stop\": \"x\", \"seed\": 42}\n"
      "{\"prompt_ids\": [1, 2, 3], \"temperature\": 0.5, \"top_k\": 4, \"stop\": [\"y\", \"z\"], "
      "\"ignore_eos\": true}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stop_token_ids\": [7]}\n";
  auto specs = ParsePromptFile(text, "p.jsonl", defaults);
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  ASSERT_EQ(specs->size(), 3u);
  const PromptSpec& a = (*specs)[0];
  EXPECT_EQ(a.prompt, "a\nb");
  EXPECT_EQ(a.params.max_tokens, 3);
  EXPECT_EQ(a.params.temperature, 0);
  EXPECT_EQ(a.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(a.params.seed, 42u);
  const PromptSpec& b = (*specs)[1];
  EXPECT_EQ(b.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(b.params.max_tokens, 5);
  EXPECT_DOUBLE_EQ(b.params.temperature, 0.5);
  EXPECT_EQ(b.params.top_k, 4);
  EXPECT_TRUE(b.params.ignore_eos);
  EXPECT_EQ(b.params.stop.size(), 2u);
  const PromptSpec& c = (*specs)[2];
  ASSERT_TRUE(c.messages.is_array());
  EXPECT_EQ(c.messages[0]["content"], "hi");
  EXPECT_EQ(c.params.stop_token_ids, std::vector<int32_t>{7});
}

TEST(PromptFileTest, JsonIsDetectedByTheFirstLine) {
  auto specs = ParsePromptFile("\n{\"prompt\": \"x\"}\n", "prompts.txt", {});
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ((*specs)[0].prompt, "x");
}

TEST(PromptFileTest, ErrorsNameTheLineAndField) {
  auto bad_type =
      ParsePromptFile("{\"prompt\": \"x\"}\n{\"prompt\": \"y\", \"top_p\": \"high\"}", "p.jsonl", {});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("p.jsonl: line 2"), std::string::npos)
      << bad_type.status().message();
  EXPECT_NE(bad_type.status().message().find("top_p"), std::string::npos);

  auto out_of_range = ParsePromptFile("{\"prompt\": \"x\", \"top_p\": 7}", "p.jsonl", {});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("top_p"), std::string::npos);

  EXPECT_FALSE(ParsePromptFile("{\"prompt\": \"x\", \"prompt_ids\": [1]}", "p.jsonl", {}).ok());
  EXPECT_FALSE(ParsePromptFile("{\"max_tokens\": 3}", "p.jsonl", {}).ok());
  EXPECT_FALSE(ParsePromptFile("{\"prompt_ids\": [-1]}", "p.jsonl", {}).ok());
  EXPECT_FALSE(ParsePromptFile("{\"prompt\": \"x\"", "p.jsonl", {}).ok());
  EXPECT_FALSE(ParsePromptFile("[1]", "p.jsonl", {}).ok());
  EXPECT_FALSE(ParsePromptFile("\n \n", "p.txt", {}).ok());
}

}  // namespace prompt_file_tests
}  // namespace kiln
