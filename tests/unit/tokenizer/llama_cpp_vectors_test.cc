// Conformance with llama.cpp's 46 tokenizer test vectors for every tokenizer
// file form kiln reads: exact ids, and decoding back.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace llama_cpp_vectors_tests {

struct VectorCase {
  const char* vectors;    // ggml-vocab-<name>
  const char* tokenizer;  // path under data/tokenizers
  const char* label;
};

class LlamaCppVectorsTest : public ::testing::TestWithParam<VectorCase> {};

TEST_P(LlamaCppVectorsTest, EncodeMatchesAndDecodeRoundTrips) {
  const VectorCase& c = GetParam();
  auto tokenizer = LoadTokenizerOrFail(TokenizerDataDir() + "/" + c.tokenizer);
  ASSERT_NE(tokenizer, nullptr);
  std::vector<TokenizerVector> vectors = ReadLlamaCppVectors(c.vectors);
  ASSERT_EQ(vectors.size(), 46u);
  for (size_t i = 0; i < vectors.size(); ++i) {
    const TokenizerVector& v = vectors[i];
    std::vector<int32_t> ids = tokenizer->Encode(v.text, /*add_special=*/false);
    EXPECT_EQ(IdsToString(ids), IdsToString(v.ids)) << "test " << i << ": \"" << v.text << "\"";
    // Byte-level BPE spells every byte; SentencePiece's dummy-prefix space
    // is dropped again by Decode, so both give the text back exactly.
    EXPECT_EQ(tokenizer->Decode(v.ids), v.text) << "test " << i;
    ExpectStreamingMatchesDecode(*tokenizer, v.ids);
    // With BOS added, skipping special tokens gives the same text.
    EXPECT_EQ(tokenizer->Decode(tokenizer->Encode(v.text, /*add_special=*/true)), v.text) << "test " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, LlamaCppVectorsTest,
    ::testing::Values(VectorCase{"qwen2", "qwen2", "qwen2_vocab_merges"},
                      VectorCase{"qwen2", "qwen2.5", "qwen25_headerless_merges"},
                      VectorCase{"llama-spm", "llama2/tokenizer.model", "llama2_sentencepiece_model"},
                      VectorCase{"llama-spm", "llama2/tokenizer.json", "llama2_tokenizer_json"},
                      VectorCase{"llama-spm", "llama2", "llama2_folder"},
                      VectorCase{"gpt-2", "gpt2", "gpt2_vocab_merges"},
                      VectorCase{"llama-bpe", "llama3", "llama3_encoder_vocab_bpe"}),
    [](const ::testing::TestParamInfo<VectorCase>& info) { return std::string(info.param.label); });

}  // namespace llama_cpp_vectors_tests
}  // namespace kiln::testing
