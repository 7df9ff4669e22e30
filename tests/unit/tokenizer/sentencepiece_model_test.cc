// tokenizer.model parsing on small models written field by field in the
// protobuf wire format: settings, piece types and rejected variants.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace sentencepiece_model_tests {

std::string Varint(uint64_t v) {
  std::string out;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    out += static_cast<char>(v ? byte | 0x80 : byte);
  } while (v);
  return out;
}
std::string VarintField(int field, uint64_t v) {
  return Varint(static_cast<uint64_t>(field) << 3) + Varint(v);
}
std::string BytesField(int field, const std::string& payload) {
  return Varint((static_cast<uint64_t>(field) << 3) | 2) + Varint(payload.size()) + payload;
}
std::string FloatField(int field, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::string out = Varint((static_cast<uint64_t>(field) << 3) | 5);
  for (int k = 0; k < 4; ++k) out += static_cast<char>((bits >> (8 * k)) & 0xff);
  return out;
}
std::string Piece(const std::string& piece, float score, int type) {
  return BytesField(1, BytesField(1, piece) + FloatField(2, score) + VarintField(3, type));
}

struct ModelOptions {
  int model_type = 2;  // BPE
  bool remove_extra_whitespaces = false;
  std::string charsmap;
  bool byte_fallback = false;
};

// <unk> <s> </s> ▁ a b ▁a ab <mask>(user defined)
std::string TinyModel(const ModelOptions& o) {
  std::string model = Piece("<unk>", 0, 2) + Piece("<s>", 0, 3) + Piece("</s>", 0, 3) +
                      Piece("\u2581", -1, 1) + Piece("a", -2, 1) + Piece("b", -3, 1) +
                      Piece("\u2581a", -0.5f, 1) + Piece("ab", -0.2f, 1) + Piece("<mask>", 0, 4);
  model += BytesField(2, VarintField(3, o.model_type) + VarintField(35, o.byte_fallback));
  model += BytesField(3, BytesField(1, "identity") + BytesField(2, o.charsmap) + VarintField(3, 1) +
                             VarintField(4, o.remove_extra_whitespaces));
  return model;
}

Expected<std::unique_ptr<Tokenizer>> LoadModelBytes(const std::string& bytes) {
  std::string dir = MakeTempDir();
  std::ofstream(dir + "/tokenizer.model", std::ios::binary) << bytes;
  return LoadTokenizer(dir);
}

TEST(SentencePieceModelTest, HandWrittenBpeModel) {
  auto tok = LoadModelBytes(TinyModel({}));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.type(), "SentencePiece BPE");
  EXPECT_EQ(t.vocab_size(), 9);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_TRUE(t.add_bos());
  // "▁a▁b": "▁a" is the only merge.
  EXPECT_EQ(t.Encode("a b", false), (std::vector<int32_t>{6, 3, 5}));
  // "ab" (-0.2) outscores "▁a" (-0.5).
  EXPECT_EQ(t.Encode("ab", false), (std::vector<int32_t>{3, 7}));
  EXPECT_EQ(t.Encode("bab", false), (std::vector<int32_t>{3, 5, 7}));
  // User-defined pieces are whole; unknown characters fold into one <unk>.
  EXPECT_EQ(t.Encode("a<mask>b", false), (std::vector<int32_t>{6, 8, 5}));
  EXPECT_EQ(t.Encode("azzb", false), (std::vector<int32_t>{6, 0, 5}));
  EXPECT_EQ(t.Decode(t.Encode("a b")), "a b");
  EXPECT_TRUE(t.IsSpecial(0));
  EXPECT_FALSE(t.IsSpecial(8));
}

TEST(SentencePieceModelTest, ExtraWhitespaceRemoval) {
  ModelOptions o;
  o.remove_extra_whitespaces = true;
  auto tok = LoadModelBytes(TinyModel(o));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->Encode("   a    b  ", false), (std::vector<int32_t>{6, 3, 5}));
}

TEST(SentencePieceModelTest, UnsupportedVariantsAreRejected) {
  ModelOptions unigram;
  unigram.model_type = 1;
  auto tok = LoadModelBytes(TinyModel(unigram));
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(tok.status().message().find("tokenizer.model"), std::string::npos);

  ModelOptions charsmap;
  charsmap.charsmap = "\x01\x02\x03";
  tok = LoadModelBytes(TinyModel(charsmap));
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kUnsupported);

  ModelOptions fallback;
  fallback.byte_fallback = true;  // but no <0x..> pieces
  tok = LoadModelBytes(TinyModel(fallback));
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("<0x00>"), std::string::npos) << tok.status().ToString();

  tok = LoadModelBytes(TinyModel({}) + "\xff");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kCorrupt);
}

}  // namespace sentencepiece_model_tests
}  // namespace kiln::testing
