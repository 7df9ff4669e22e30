// Special and added tokens: matched whole before BPE, BOS/EOS and
// end-of-generation ids from configuration, skipped or kept by Decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "tokenizer/tokenizer_config.h"
#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace special_tokens_tests {

bool Contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

TEST(SpecialTokensTest, ChatMarkersBecomeSingleIdsInQwen) {
  auto tok = LoadTokenizerOrFail(ModelDir("tiny-qwen2"));
  ASSERT_NE(tok, nullptr);
  std::string text = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
  std::vector<int32_t> ids = tok->Encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 2046);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2046), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2047), 1);
  // The text between markers is encoded as if on its own.
  std::vector<int32_t> user = tok->Encode("user\nHello", false);
  EXPECT_TRUE(std::equal(user.begin(), user.end(), ids.begin() + 1));
  EXPECT_EQ(ids[1 + user.size()], 2047);

  // Without parsing, the markers are plain text.
  std::vector<int32_t> plain = tok->Encode(text, true, /*parse_special=*/false);
  EXPECT_FALSE(Contains(plain, 2046));
  EXPECT_FALSE(Contains(plain, 2047));
  EXPECT_EQ(tok->Decode(plain), text);

  EXPECT_EQ(tok->Decode(ids), "user\nHello\nassistant\n");
  EXPECT_EQ(tok->Decode(ids, /*skip_special=*/false), text);
}

TEST(SpecialTokensTest, QwenIdsAndEndOfGeneration) {
  auto tok = LoadTokenizerOrFail(ModelDir("tiny-qwen3"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->type(), "byte-level BPE");
  EXPECT_EQ(tok->vocab_size(), 2048);
  EXPECT_EQ(tok->bos_id(), -1);  // bos_token is null in tokenizer_config.json
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->eos_id(), 2045);
  EXPECT_EQ(tok->end_of_generation_ids(), (std::vector<int32_t>{2045, 2047}));
  EXPECT_TRUE(tok->IsEndOfGeneration(2047));
  EXPECT_FALSE(tok->IsEndOfGeneration(2046));
  EXPECT_TRUE(tok->IsSpecial(2045));
  EXPECT_FALSE(tok->IsSpecial(100));
  EXPECT_FALSE(tok->IsSpecial(-1));
  EXPECT_FALSE(tok->IsSpecial(5000));
  ASSERT_EQ(tok->special_tokens().size(), 3u);
  EXPECT_EQ(tok->special_tokens()[1].content, "<|im_start|>");
  EXPECT_EQ(tok->TokenPiece(2047), "<|im_end|>");
  EXPECT_EQ(tok->TokenPiece(198), "Ċ");
  EXPECT_EQ(tok->TokenPiece(-3), "");
  EXPECT_NE(tok->chat_template().find("<|im_start|>"), std::string::npos);
}

TEST(SpecialTokensTest, Qwen25AddedTokensThatAreNotSpecialStayInDecodedText) {
  auto tok = LoadTokenizerOrFail(TokenizerDataDir() + "/qwen2.5");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 151665);
  EXPECT_EQ(tok->eos_id(), 151645);
  EXPECT_EQ(tok->end_of_generation_ids(), (std::vector<int32_t>{151643, 151645}));
  std::vector<int32_t> ids = tok->Encode("<tool_call>{}</tool_call><|im_end|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 151657);
  EXPECT_EQ(ids[ids.size() - 2], 151658);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_FALSE(tok->IsSpecial(151657));
  EXPECT_EQ(tok->Decode(ids), "<tool_call>{}</tool_call>");
}

TEST(SpecialTokensTest, Llama3AddsBeginOfTextAndStopsAtEndOfTurn) {
  auto tok = LoadTokenizerOrFail(TokenizerDataDir() + "/llama3");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128009);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->end_of_generation_ids(), (std::vector<int32_t>{128001, 128008, 128009}));
  std::vector<int32_t> ids = tok->Encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[1], 128006);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_EQ(tok->Encode("Hello world", false), (std::vector<int32_t>{9906, 1917}));
  EXPECT_NE(tok->chat_template().find("start_header_id"), std::string::npos);
}

TEST(SpecialTokensTest, Gpt2EndOfTextLivesInTheVocabulary) {
  auto tok = LoadTokenizerOrFail(TokenizerDataDir() + "/gpt2");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_FALSE(tok->add_bos());
  std::vector<int32_t> ids = tok->Encode("a<|endoftext|>b");
  EXPECT_EQ(ids, (std::vector<int32_t>{64, 50256, 65}));
  EXPECT_EQ(tok->Decode(ids), "ab");
  EXPECT_EQ(tok->Decode(ids, false), "a<|endoftext|>b");
  EXPECT_TRUE(tok->chat_template().empty());
}

TEST(SpecialTokensTest, SentencePieceControlTokensInText) {
  for (const char* file : {"tokenizer.model", "tokenizer.json"}) {
    SCOPED_TRACE(file);
    auto tok = LoadTokenizerOrFail(ModelDir("tiny-llama") + "/" + file);
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->type(), "SentencePiece BPE");
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    EXPECT_EQ(tok->unk_id(), 0);
    EXPECT_EQ(tok->end_of_generation_ids(), (std::vector<int32_t>{2}));
    // Each text segment gets its own dummy-prefix space.
    std::vector<int32_t> expected = tok->Encode("Hello", true);
    std::vector<int32_t> world = tok->Encode("world", false);
    expected.push_back(2);
    expected.insert(expected.end(), world.begin(), world.end());
    EXPECT_EQ(tok->Encode("Hello</s>world"), expected);
    // Only the first visible piece loses its dummy-prefix space.
    EXPECT_EQ(tok->Decode(expected), "Hello world");
    EXPECT_EQ(tok->Decode(expected, false), "<s> Hello</s> world");
  }
}

TEST(SpecialTokensTest, StreamingContinuationKeepsTheLeadingSpace) {
  auto tok = LoadTokenizerOrFail(ModelDir("tiny-llama"));
  ASSERT_NE(tok, nullptr);
  std::vector<int32_t> ids = tok->Encode("Let there be light", false);
  StreamingDecoder fresh(*tok);
  StreamingDecoder continuing(*tok, true, /*at_text_start=*/false);
  std::string a, b;
  for (int32_t id : ids) {
    a += fresh.Add(id);
    b += continuing.Add(id);
  }
  a += fresh.Flush();
  b += continuing.Flush();
  EXPECT_EQ(a, "Let there be light");
  EXPECT_EQ(b, " Let there be light");
}

TEST(SpecialTokensTest, QwenMergesStartingWithHashAreReal) {
  // "#include" is one token only with the merges that start with '#'.
  auto tok = LoadTokenizerOrFail(TokenizerDataDir() + "/qwen2");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("#include <stdio.h>", false), (std::vector<int32_t>{1067, 366, 10345, 860, 29}));
}

// Folders without a template in tokenizer_config.json keep it in a file of
// its own: chat_template.jinja, or chat_template.json as multimodal
// processors (Gemma 3's) write it; tokenizer_config.json's wins.
TEST(TokenizerConfig, ChatTemplateFiles) {
  auto write = [](const std::string& path, const std::string& text) { std::ofstream(path) << text; };
  std::string dir = MakeTempDir();
  write(dir + "/chat_template.json", R"({"chat_template": "{{ messages[0].content }}"})");
  auto config = ReadTokenizerConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->chat_template, "{{ messages[0].content }}");
  write(dir + "/chat_template.jinja", "jinja file");
  EXPECT_EQ(ReadTokenizerConfig(dir)->chat_template, "jinja file");
  write(dir + "/tokenizer_config.json", R"({"chat_template": "config"})");
  EXPECT_EQ(ReadTokenizerConfig(dir)->chat_template, "config");

  std::string bad = MakeTempDir();
  write(bad + "/chat_template.json", R"(["not", "an", "object"])");
  auto refused = ReadTokenizerConfig(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("chat_template.json"), std::string::npos) << refused.status().ToString();
}

}  // namespace special_tokens_tests
}  // namespace kiln::testing
