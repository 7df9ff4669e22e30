// GPT-2's byte <-> character table.
#include "tokenizer/byte_unicode.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln {
namespace byte_unicode_tests {

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

}  // namespace byte_unicode_tests
}  // namespace kiln
