#include "core/json_brackets.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln {
namespace json_brackets_tests {

std::vector<int> Depths(const std::string& text) {
  JsonBrackets brackets;
  std::vector<int> depths;
  for (char c : text) depths.push_back(brackets.Push(c));
  return depths;
}

TEST(JsonBrackets, CountsNestingOutsideStringsOnly) {
  EXPECT_EQ(Depths(R"({"a":[1]})"), (std::vector<int>{1, 1, 1, 1, 1, 2, 2, 1, 0}));
  // Brackets and escaped quotes inside a string do not count.
  EXPECT_EQ(Depths(R"(["{\"]"])"), (std::vector<int>{1, 1, 1, 1, 1, 1, 1, 0}));
  // An escaped backslash ends the escape: the quote after it closes the string.
  EXPECT_EQ(Depths(R"(["\\"])"), (std::vector<int>{1, 1, 1, 1, 1, 0}));
  // A stray closing bracket does not go below zero.
  EXPECT_EQ(Depths("]]["), (std::vector<int>{0, 0, 1}));
}

}  // namespace json_brackets_tests
}  // namespace kiln
