// UTF-8 validation edge cases, decoding and lossy repair.
#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace kiln {
namespace utf8_tests {

TEST(Utf8, Validates) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe6\x97"));          // truncated
  EXPECT_EQ(FirstInvalidUtf8("ab\xff"), 2u);
}

TEST(Utf8, CompletePrefixHoldsBackPartialCharacters) {
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe6\x97"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe6\x97\xa5"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("\xff" "a"), 2u);  // garbage is not held back
}

TEST(Utf8, Appends) {
  std::string s;
  AppendUtf8(s, U'é');
  AppendUtf8(s, 0x1F600);
  EXPECT_EQ(s, "\xc3\xa9\xf0\x9f\x98\x80");
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

}  // namespace utf8_tests
}  // namespace kiln
