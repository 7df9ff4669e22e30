// The compiled tokenizer an artifact stores: a tokenizer rebuilt from the
// encoded spec behaves exactly as the one loaded from its files, and
// damaged bytes are refused with an error rather than misread.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/tokenizer_spec_codec.h"
#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace tokenizer_spec_codec_tests {

std::unique_ptr<Tokenizer> ThroughCodec(const std::string& path) {
  auto spec = LoadTokenizerSpec(path);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  if (!spec.ok()) return nullptr;
  std::vector<uint8_t> bytes = EncodeTokenizerSpec(*spec);
  auto decoded = DecodeTokenizerSpec(bytes, "stored");
  EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
  if (!decoded.ok()) return nullptr;
  // Encoding what was decoded gives the same bytes: nothing is lost.
  EXPECT_EQ(EncodeTokenizerSpec(*decoded), bytes);
  auto tokenizer = Tokenizer::Create(std::move(decoded).value());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

// Everything a caller can observe of the two tokenizers agrees.
void ExpectSameTokenizer(const Tokenizer& a, const Tokenizer& b, const std::string& text) {
  ASSERT_EQ(a.vocab_size(), b.vocab_size());
  EXPECT_EQ(a.type(), b.type());
  EXPECT_EQ(a.bos_id(), b.bos_id());
  EXPECT_EQ(a.eos_id(), b.eos_id());
  EXPECT_EQ(a.unk_id(), b.unk_id());
  EXPECT_EQ(a.add_bos(), b.add_bos());
  EXPECT_EQ(a.add_eos(), b.add_eos());
  EXPECT_EQ(a.end_of_generation_ids(), b.end_of_generation_ids());
  EXPECT_EQ(a.chat_template(), b.chat_template());
  ASSERT_EQ(a.special_tokens().size(), b.special_tokens().size());
  for (size_t i = 0; i < a.special_tokens().size(); ++i) {
    EXPECT_EQ(a.special_tokens()[i].id, b.special_tokens()[i].id);
    EXPECT_EQ(a.special_tokens()[i].content, b.special_tokens()[i].content);
    EXPECT_EQ(a.special_tokens()[i].special, b.special_tokens()[i].special);
  }
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    ASSERT_EQ(a.TokenPiece(id), b.TokenPiece(id)) << "id " << id;
    const int32_t one[] = {id};
    ASSERT_EQ(a.Decode(one, false), b.Decode(one, false)) << "id " << id;
  }
  for (bool add_special : {true, false}) {
    for (bool parse_special : {true, false}) {
      std::vector<int32_t> ids = a.Encode(text, add_special, parse_special);
      EXPECT_EQ(ids, b.Encode(text, add_special, parse_special));
      EXPECT_EQ(a.Decode(ids), b.Decode(ids));
    }
  }
}

std::string SampleText() {
  std::string text = ReadTestFile(SharedDir() + "/data/text/heldout.txt").substr(0, 20000);
  // Special tokens written in the text, odd spacing, digits, non-Latin
  // scripts and malformed UTF-8.
  text += "<|im_start|>user\n  two  spaces\t\ttabs 12345 <s></s> こんにちは Привет \xff\xfe end<|im_end|>";
  return text;
}

class TokenizerSpecCodecTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerSpecCodecTest, TheStoredSpecRebuildsTheSameTokenizer) {
  const std::string path = SharedDir() + "/" + GetParam();
  std::unique_ptr<Tokenizer> direct = LoadTokenizerOrFail(path);
  ASSERT_NE(direct, nullptr);
  std::unique_ptr<Tokenizer> stored = ThroughCodec(path);
  ASSERT_NE(stored, nullptr);
  ExpectSameTokenizer(*direct, *stored, SampleText());
}

// Every form of tokenizer kiln reads: tokenizer.json (byte-level and
// SentencePiece-style BPE), tokenizer.model, vocab.json + merges.txt,
// encoder.json + vocab.bpe, and GGUF metadata of both model kinds; the
// real 150k-token vocabularies among them.
INSTANTIATE_TEST_SUITE_P(Sources, TokenizerSpecCodecTest,
                         ::testing::Values("models/tiny-llama", "models/tiny-llama/tokenizer.model",
                                           "models/tiny-qwen2", "models/tiny-qwen3",
                                           "models/gguf/tiny-llama-F32.gguf", "models/gguf/tiny-qwen2-F32.gguf",
                                           "data/tokenizers/llama2", "data/tokenizers/qwen2.5/vocab.json",
                                           "data/tokenizers/llama3/encoder.json", "data/tokenizers/gpt2/vocab.json"));

std::vector<uint8_t> TinyQwenBytes() {
  auto spec = LoadTokenizerSpec(SharedDir() + "/models/tiny-qwen2");
  EXPECT_TRUE(spec.ok());
  return spec.ok() ? EncodeTokenizerSpec(*spec) : std::vector<uint8_t>{};
}

TEST(TokenizerSpecCodec, EveryTruncationIsRefused) {
  std::vector<uint8_t> bytes = TinyQwenBytes();
  ASSERT_GT(bytes.size(), 1000u);
  // Every cut in the header and the tail (the small fields), and a spread
  // of cuts through the pieces and merges.
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 64; ++n) cuts.push_back(n);
  for (size_t n = bytes.size() - 2048; n < bytes.size(); ++n) cuts.push_back(n);
  for (size_t n = 64; n < bytes.size(); n += 977) cuts.push_back(n);
  for (size_t n : cuts) {
    auto spec = DecodeTokenizerSpec({bytes.data(), n}, "cut");
    ASSERT_FALSE(spec.ok()) << "cut at " << n;
    EXPECT_EQ(spec.status().code(), StatusCode::kCorrupt) << spec.status().ToString();
  }
}

TEST(TokenizerSpecCodec, ForeignBytesAreRefusedByName) {
  std::vector<uint8_t> bytes = TinyQwenBytes();
  ASSERT_GT(bytes.size(), 16u);
  std::vector<uint8_t> magic = bytes;
  magic[0] ^= 0xff;
  auto a = DecodeTokenizerSpec(magic, "m.kiln");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("not a compiled tokenizer"), std::string::npos) << a.status().ToString();

  std::vector<uint8_t> version = bytes;
  version[4] = 99;
  auto b = DecodeTokenizerSpec(version, "m.kiln");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("compiled tokenizer format 99"), std::string::npos) << b.status().ToString();

  std::vector<uint8_t> flavor = bytes;
  flavor[8] = 7;  // the BPE flavour byte
  auto c = DecodeTokenizerSpec(flavor, "m.kiln");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("BPE flavour 7"), std::string::npos) << c.status().ToString();

  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  auto d = DecodeTokenizerSpec(longer, "m.kiln");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("left over"), std::string::npos) << d.status().ToString();
}

TEST(TokenizerSpecCodec, AHugeCountIsRefusedBeforeItIsAllocated) {
  std::vector<uint8_t> bytes = TinyQwenBytes();
  ASSERT_GT(bytes.size(), 16u);
  // The piece count follows magic, version and flavour.
  const uint32_t huge = 0x7fffffff;
  std::memcpy(bytes.data() + 9, &huge, sizeof(huge));
  auto spec = DecodeTokenizerSpec(bytes, "m.kiln");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("pieces do not fit"), std::string::npos) << spec.status().ToString();
}

// The fuzz target's seeds (written by tests/fuzz/make_seeds.py, apart from
// this encoder) are valid compiled tokenizers that build and encode.
TEST(TokenizerSpecCodec, TheFuzzSeedsAreValidTokenizers) {
  for (const char* name : {"byte_level.bin", "sentencepiece.bin"}) {
    std::string bytes = ReadTestFile(SourceDir() + "/tests/fuzz/seeds/tokenizer_spec_fuzz/" + name);
    auto spec = DecodeTokenizerSpec({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, name);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto tokenizer = Tokenizer::Create(std::move(spec).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
    EXPECT_FALSE((*tokenizer)->Encode("abc ab", false).empty()) << name;
  }
}

}  // namespace tokenizer_spec_codec_tests
}  // namespace kiln::testing
