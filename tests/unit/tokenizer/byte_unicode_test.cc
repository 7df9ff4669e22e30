// GPT-2's byte <-> character table and the tokenizer's UTF-8 helpers.
#include "tokenizer/byte_unicode.h"

#include <gtest/gtest.h>

#include <set>

#include "tokenizer/utf8_decode.h"

namespace kiln {
namespace {

TEST(ByteUnicodeTest, TableIsAPrintableBijection) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    char32_t cp = ByteToUnicode(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << b;
    EXPECT_GT(cp, 0x20u);
    EXPECT_EQ(UnicodeToByte(cp), static_cast<uint8_t>(b));
  }
  EXPECT_EQ(ByteToUnicodeUtf8(' '), "Ġ");
  EXPECT_EQ(ByteToUnicodeUtf8('\n'), "Ċ");
  EXPECT_EQ(ByteToUnicodeUtf8('a'), "a");
  EXPECT_EQ(ByteToUnicode(0xAD), 0x143u);  // the last byte moved
  EXPECT_FALSE(UnicodeToByte(0x20).has_value());
}

TEST(ByteUnicodeTest, TextRoundTrip) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
  EXPECT_EQ(UnicodeTextToBytes(BytesToUnicodeText(bytes)), bytes);
  EXPECT_EQ(UnicodeTextToBytes("Ġhello"), " hello");
  EXPECT_FALSE(UnicodeTextToBytes("日").has_value());
  EXPECT_FALSE(UnicodeTextToBytes("\xff").has_value());
}

TEST(Utf8DecodeTest, LossyReplacement) {
  auto lossy = [](std::string_view s) {
    std::string out;
    AppendUtf8Lossy(s, out);
    return out;
  };
  EXPECT_EQ(lossy("abc é 😀"), "abc é 😀");
  EXPECT_EQ(lossy("\xe6\x97"
                  "A"),
            "\uFFFD"
            "A");  // one maximal subpart
  EXPECT_EQ(lossy("\xf0\x9f\x98"), "\uFFFD");
  EXPECT_EQ(lossy("\x80\x80"), "\uFFFD\uFFFD");
  EXPECT_EQ(lossy("\xed\xa0\x80"), "\uFFFD\uFFFD\uFFFD");  // a surrogate
  EXPECT_EQ(lossy("\xc0\xaf"), "\uFFFD\uFFFD");            // an overlong
}

TEST(Utf8DecodeTest, DecodeAt) {
  char32_t cp;
  EXPECT_EQ(DecodeUtf8At("é", 0, &cp), 2u);
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(DecodeUtf8At("😀", 0, &cp), 4u);
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(DecodeUtf8At("\xe6\x97", 0, &cp), 1u);
  EXPECT_EQ(cp, kInvalidCodePoint);
}

}  // namespace
}  // namespace kiln
