// kiln's SentencePiece BPE (tokenizer.model and tokenizer.json) against the
// SentencePiece library on held-out lines and generated text.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <random>

#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace sentencepiece_oracle_tests {

std::vector<std::string> OracleTexts() {
  std::vector<std::string> texts;
  std::string heldout = ReadTestFile(SharedDir() + "/data/text/heldout.txt");
  size_t pos = 0;
  while (pos < heldout.size()) {
    size_t end = heldout.find('\n', pos);
    if (end == std::string::npos) end = heldout.size();
    texts.push_back(heldout.substr(pos, end - pos));
    pos = end + 1;
  }
  texts.push_back(heldout);
  // Random mixtures of ASCII, whitespace runs, accented letters, CJK, emoji
  // and characters no vocabulary has (byte fallback).
  const std::vector<std::string> alphabet = {"a",  "e",  "t", " ",    "  ",     "\n", "\t", "1",
                                             "9",  ".",  "'", "#",    "é",      "ß",  "Ж",  "日",
                                             "本", "語", "😀", "🦙", "\u200d", "ꙮ",  "𝔸",  "<s>"};
  std::mt19937 rng(2024);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), length(0, 60);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (size_t n = length(rng); n > 0; --n) text += alphabet[pick(rng)];
    texts.push_back(std::move(text));
  }
  return texts;
}

struct OracleCase {
  const char* model_file;  // the SentencePiece model the library loads
  const char* kiln_file;   // what kiln loads
  const char* label;
};

class SentencePieceOracleTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(SentencePieceOracleTest, EncodeAndDecodeAgreeWithTheLibrary) {
  const OracleCase& c = GetParam();
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(SharedDir() + "/" + c.model_file).ok());
  auto tok = LoadTokenizerOrFail(SharedDir() + "/" + c.kiln_file);
  ASSERT_NE(tok, nullptr);
  int mismatches = 0;
  for (const std::string& text : OracleTexts()) {
    std::vector<int> expected;
    ASSERT_TRUE(sp.Encode(text, &expected).ok());
    // The library reads "<s>" as text, so kiln must not parse it here.
    std::vector<int32_t> ids = tok->Encode(text, /*add_special=*/false, /*parse_special=*/false);
    if (ids != std::vector<int32_t>(expected.begin(), expected.end()) && ++mismatches <= 5) {
      ADD_FAILURE() << "\"" << text << "\"\n  library " << IdsToString({expected.begin(), expected.end()})
                    << "\n  kiln    " << IdsToString(ids);
    }
    std::string decoded;
    ASSERT_TRUE(sp.Decode(expected, &decoded).ok());
    EXPECT_EQ(tok->Decode(ids), decoded);
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, SentencePieceOracleTest,
    ::testing::Values(OracleCase{"data/tokenizers/llama2/tokenizer.model",
                                 "data/tokenizers/llama2/tokenizer.model", "llama2_model"},
                      OracleCase{"data/tokenizers/llama2/tokenizer.model",
                                 "data/tokenizers/llama2/tokenizer.json", "llama2_json"},
                      OracleCase{"models/tiny-llama/tokenizer.model", "models/tiny-llama/tokenizer.model",
                                 "tiny_llama_model"},
                      OracleCase{"models/tiny-llama/tokenizer.model", "models/tiny-llama/tokenizer.json",
                                 "tiny_llama_json"}),
    [](const ::testing::TestParamInfo<OracleCase>& info) { return std::string(info.param.label); });

}  // namespace sentencepiece_oracle_tests
}  // namespace kiln::testing
