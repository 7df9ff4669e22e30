// StopStringFilter: stop strings are found across pieces and never streamed
// out, not even in part.
#include "engine/stop_string_filter.h"

#include <gtest/gtest.h>

namespace kiln {
namespace stop_string_filter_tests {

// Feeds `pieces` one at a time and returns what was released.
std::vector<std::string> Feed(StopStringFilter& f, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const std::string& p : pieces) out.push_back(f.Push(p));
  return out;
}

TEST(StopStringFilterTest, ReleasesTextThatCannotStartAStopString) {
  StopStringFilter f({"END"});
  EXPECT_EQ(Feed(f, {"hello", " world"}), (std::vector<std::string>{"hello", " world"}));
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.Finish(), "");
}

TEST(StopStringFilterTest, HoldsBackAPossibleBeginningAcrossPieces) {
  StopStringFilter f({"END"});
  EXPECT_EQ(f.Push("abc E"), "abc ");
  EXPECT_EQ(f.Push("N"), "");
  EXPECT_EQ(f.Push("D and more"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.matched(), "END");
  EXPECT_EQ(f.Push("later"), "");
}

TEST(StopStringFilterTest, ReleasesHeldTextWhenTheMatchFails) {
  StopStringFilter f({"END"});
  EXPECT_EQ(f.Push("xE"), "x");
  EXPECT_EQ(f.Push("Nx"), "ENx");
  EXPECT_FALSE(f.stopped());
}

TEST(StopStringFilterTest, TheEarliestOfSeveralStopsWins) {
  StopStringFilter f({"world", "lo w"});
  EXPECT_EQ(f.Push("hello world"), "hel");
  EXPECT_EQ(f.matched(), "lo w");
}

TEST(StopStringFilterTest, StopInsideOnePieceKeepsTheTextBefore) {
  StopStringFilter f({"\n\n"});
  EXPECT_EQ(f.Push("line one\n"), "line one");
  EXPECT_EQ(f.Push("\nline two"), "");
  EXPECT_TRUE(f.stopped());
}

TEST(StopStringFilterTest, FinishReleasesAnUnfinishedBeginning) {
  StopStringFilter f({"</answer>"});
  EXPECT_EQ(f.Push("42 </ans"), "42 ");
  EXPECT_EQ(f.Finish(), "</ans");
}

TEST(StopStringFilterTest, UncheckedTextIsReleasedWhole) {
  StopStringFilter f({"END"});
  EXPECT_EQ(f.Push("xxEND", /*check=*/false), "xxEND");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.Push("yEND"), "y");
  EXPECT_TRUE(f.stopped());
}

TEST(StopStringFilterTest, MultiByteCharactersAreHeldWhole) {
  StopStringFilter f({"日本"});
  EXPECT_EQ(f.Push("über 日"), "über ");
  EXPECT_EQ(f.Push("本語"), "");
  EXPECT_TRUE(f.stopped());
}

TEST(StopStringFilterTest, NoStopStringsPassEverything) {
  StopStringFilter f({});
  EXPECT_EQ(f.Push("anything"), "anything");
  EXPECT_EQ(f.Finish(), "");
}

}  // namespace stop_string_filter_tests
}  // namespace kiln
