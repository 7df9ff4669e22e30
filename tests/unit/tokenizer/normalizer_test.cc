// Normalizer steps, including what happens to malformed UTF-8.
#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>

namespace kiln {
namespace normalizer_tests {

TEST(NormalizerTest, UnicodeForms) {
  Normalizer nfc;
  nfc.AddUnicodeForm(Normalizer::Form::kNfc);
  EXPECT_EQ(nfc.Apply("Cafe\u0301"), "Caf\u00e9");
  EXPECT_EQ(nfc.Apply("\u1100\u1161\u11a8"), "\uac01");
  EXPECT_EQ(nfc.Apply("\ufb01"), "\ufb01");  // compatibility characters stay
  Normalizer nfkc;
  nfkc.AddUnicodeForm(Normalizer::Form::kNfkc);
  EXPECT_EQ(nfkc.Apply("\ufb01"), "fi");
  Normalizer nfd;
  nfd.AddUnicodeForm(Normalizer::Form::kNfd);
  EXPECT_EQ(nfd.Apply("\u00e9"), "e\u0301");
}

TEST(NormalizerTest, MalformedBytesPassThroughAndSplitNormalization) {
  Normalizer nfc;
  nfc.AddUnicodeForm(Normalizer::Form::kNfc);
  // The valid runs around the bad bytes are normalized; the bytes stay.
  EXPECT_EQ(nfc.Apply("e\u0301\xff\xfe"
                      "A\u030a\xe6"),
            "\u00e9\xff\xfe\u00c5\xe6");
  // A combining mark after a bad byte has nothing to combine with.
  EXPECT_EQ(nfc.Apply("e\xff\u0301"), "e\xff\u0301");
  std::string nul("a\0b", 3);
  EXPECT_EQ(nfc.Apply(nul + "\u00e9"), nul + "\u00e9");
}

TEST(NormalizerTest, SentencePieceSpaceHandling) {
  Normalizer n;
  n.AddCollapseSpaces();
  n.AddPrepend(" ");
  n.AddReplace(" ", "\u2581");
  EXPECT_EQ(n.Apply("  Hello   world  "), "\u2581Hello\u2581world");
  EXPECT_EQ(n.Apply(""), "");  // nothing is prepended to empty text
  EXPECT_EQ(n.Apply("   "), "");
}

TEST(NormalizerTest, ReplaceAndLowercase) {
  Normalizer n;
  n.AddReplace("ab", "x");
  n.AddLowercase();
  EXPECT_EQ(n.Apply("ABab aab ÄÖ"), "abx ax äö");
  auto regex = Regex::Compile(R"(\d+)");
  ASSERT_TRUE(regex.ok());
  Normalizer digits;
  digits.AddReplaceRegex(std::move(regex).value(), "#");
  EXPECT_EQ(digits.Apply("a1b22c333"), "a#b#c#");
}

}  // namespace normalizer_tests
}  // namespace kiln
