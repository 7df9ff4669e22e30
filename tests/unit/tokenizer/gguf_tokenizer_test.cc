// Tokenizers read from GGUF metadata (tokenizer.ggml.*) must behave exactly
// like the Hugging Face folders the GGUF files were converted from.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace gguf_tokenizer_tests {

struct GgufCase {
  const char* gguf;
  const char* model;
  const char* label;
};

// Lines of the held-out text plus strings that stress pre-tokenization,
// byte fallback and special-token parsing.
std::vector<std::string> ComparisonTexts() {
  std::vector<std::string> texts = {
      "",
      " ",
      "Hello world",
      "  leading spaces and trailing  ",
      "\n\n\t mixed\r\n whitespace",
      "digits 1234567890 3.14159",
      "Café crème, naïve résumé — “quoted” über 日本語 Δελτα 😀!",
      "<|im_start|>user\nHi<|im_end|>\n<s>x</s>",
      std::string(3000, 'z'),
      "#include <stdio.h>\n",
      "Cafe\u0301 A\u030a",  // not NFC: Qwen's tokenizers compose it first
  };
  std::string heldout = ReadTestFile(SharedDir() + "/data/text/heldout.txt");
  size_t pos = 0;
  for (int i = 0; i < 300 && pos < heldout.size(); ++i) {
    size_t end = heldout.find('\n', pos);
    if (end == std::string::npos) end = heldout.size();
    texts.push_back(heldout.substr(pos, end - pos));
    pos = end + 1;
  }
  return texts;
}

class GgufTokenizerTest : public ::testing::TestWithParam<GgufCase> {};

TEST_P(GgufTokenizerTest, MatchesTheHuggingFaceFolder) {
  const GgufCase& c = GetParam();
  auto from_gguf = LoadTokenizerOrFail(ModelDir("gguf") + "/" + c.gguf);
  auto from_folder = LoadTokenizerOrFail(ModelDir(c.model));
  ASSERT_NE(from_gguf, nullptr);
  ASSERT_NE(from_folder, nullptr);

  EXPECT_EQ(from_gguf->type(), from_folder->type());
  EXPECT_EQ(from_gguf->vocab_size(), from_folder->vocab_size());
  EXPECT_EQ(from_gguf->eos_id(), from_folder->eos_id());
  EXPECT_EQ(from_gguf->add_bos(), from_folder->add_bos());
  EXPECT_EQ(from_gguf->end_of_generation_ids(), from_folder->end_of_generation_ids());
  EXPECT_EQ(from_gguf->chat_template(), from_folder->chat_template());
  for (int32_t id = 0; id < from_folder->vocab_size(); ++id) {
    ASSERT_EQ(from_gguf->TokenPiece(id), from_folder->TokenPiece(id)) << "id " << id;
    ASSERT_EQ(from_gguf->IsSpecial(id), from_folder->IsSpecial(id)) << "id " << id;
  }

  for (const std::string& text : ComparisonTexts()) {
    std::vector<int32_t> ids = from_gguf->Encode(text);
    EXPECT_EQ(IdsToString(ids), IdsToString(from_folder->Encode(text))) << "\"" << text << "\"";
    EXPECT_EQ(from_gguf->Decode(ids), from_folder->Decode(ids));
  }

  for (int i = 0; i < 4; ++i) {
    auto prompt = nlohmann::json::parse(
        ReadTestFile(ModelDir(c.model) + "/reference/prompt_" + std::to_string(i) + ".json"));
    EXPECT_EQ(from_gguf->Encode(prompt["prompt"].get<std::string>()),
              prompt["input_ids"].get<std::vector<int32_t>>())
        << "prompt " << i;
    auto new_ids = prompt["greedy"]["new_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(from_gguf->Decode(new_ids), prompt["greedy"]["decoded_new"].get<std::string>())
        << "prompt " << i;
  }
  auto heldout = nlohmann::json::parse(ReadTestFile(ModelDir(c.model) + "/reference/heldout_ppl.json"));
  auto expected = heldout["token_ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> ids = from_gguf->Encode(ReadTestFile(SharedDir() + "/data/text/heldout.txt"));
  ASSERT_GE(ids.size(), expected.size());
  ids.resize(expected.size());
  EXPECT_EQ(ids, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Files, GgufTokenizerTest,
    ::testing::Values(GgufCase{"tiny-llama-F32.gguf", "tiny-llama", "tiny_llama_f32"},
                      GgufCase{"tiny-llama-Q4_K_M.gguf", "tiny-llama", "tiny_llama_q4_k_m"},
                      GgufCase{"tiny-qwen2-F32.gguf", "tiny-qwen2", "tiny_qwen2_f32"},
                      GgufCase{"tiny-qwen3-F16.gguf", "tiny-qwen3", "tiny_qwen3_f16"},
                      GgufCase{"tiny-qwen3-Q2_K.gguf", "tiny-qwen3", "tiny_qwen3_q2_k"}),
    [](const ::testing::TestParamInfo<GgufCase>& info) { return std::string(info.param.label); });

TEST(GgufTokenizerErrorsTest, FileWithoutTokenizerMetadataIsReported) {
  // A minimal GGUF v3 header with no metadata and no tensors.
  std::string bytes("GGUF", 4);
  auto put = [&](uint64_t v, int n) {
    for (int k = 0; k < n; ++k) bytes += static_cast<char>((v >> (8 * k)) & 0xff);
  };
  put(3, 4);  // version
  put(0, 8);  // tensor count
  put(0, 8);  // metadata count
  auto gguf = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "empty.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto tok = LoadTokenizerFromGguf(**gguf);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("empty.gguf"), std::string::npos) << tok.status().ToString();
  EXPECT_NE(tok.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

}  // namespace gguf_tokenizer_tests
}  // namespace kiln::testing
