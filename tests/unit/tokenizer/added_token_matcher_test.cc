// Finding added tokens in text: leftmost, then longest; strip options.
#include "tokenizer/added_token_matcher.h"

#include <gtest/gtest.h>

namespace kiln {
namespace added_token_matcher_tests {

// Renders a split as "text|<id>|text".
std::string SplitToString(const AddedTokenMatcher& matcher, std::string_view text) {
  std::string out;
  matcher.Split(
      text,
      [&](std::string_view piece) {
        out += '[';
        out.append(piece);
        out += ']';
      },
      [&](int32_t id) {
        out += '<';
        out += std::to_string(id);
        out += '>';
      });
  return out;
}

AddedToken Token(int32_t id, std::string content) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = true;
  return t;
}

TEST(AddedTokenMatcherTest, LeftmostThenLongest) {
  AddedTokenMatcher m({Token(1, "<|a|>"), Token(2, "<|a|>b"), Token(3, "|a")});
  EXPECT_EQ(SplitToString(m, "x<|a|>by<|a|>"), "[x]<2>[y]<1>");
  EXPECT_EQ(SplitToString(m, "|a|>"), "<3>[|>]");
  EXPECT_EQ(SplitToString(m, "<|a|><|a|>"), "<1><1>");
  EXPECT_EQ(SplitToString(m, "no tokens"), "[no tokens]");
  EXPECT_EQ(SplitToString(m, ""), "");
  EXPECT_EQ(SplitToString(m, "<|a"), "[<]<3>");
  EXPECT_EQ(SplitToString(m, "<|"), "[<|]");
}

TEST(AddedTokenMatcherTest, StripOptionsSwallowWhitespace) {
  AddedToken left = Token(7, "<mask>");
  left.lstrip = true;
  AddedToken right = Token(8, "<sep>");
  right.rstrip = true;
  AddedTokenMatcher m({left, right});
  EXPECT_EQ(SplitToString(m, "a  <mask> b"), "[a]<7>[ b]");
  EXPECT_EQ(SplitToString(m, "a <sep>  b"), "[a ]<8>[b]");
}

TEST(AddedTokenMatcherTest, SingleWordNeedsWordBoundaries) {
  AddedToken word = Token(9, "cat");
  word.single_word = true;
  AddedTokenMatcher m({word});
  EXPECT_EQ(SplitToString(m, "a cat sat"), "[a ]<9>[ sat]");
  EXPECT_EQ(SplitToString(m, "concatenate"), "[concatenate]");
}

}  // namespace added_token_matcher_tests
}  // namespace kiln
