// Pre-tokenizer splits: the byte-level families' patterns on hand-checked
// strings, Hugging Face's delimiter behaviours and Metaspace.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace kiln {
namespace pre_tokenizer_tests {

using Pieces = std::vector<std::string>;

Pieces Split(std::string_view pattern, std::string_view text,
             SplitBehavior behavior = SplitBehavior::kIsolated, bool invert = false) {
  auto regex = Regex::Compile(pattern);
  EXPECT_TRUE(regex.ok()) << regex.status().ToString();
  PreTokenizer pre;
  pre.AddSplit(std::move(regex).value(), behavior, invert);
  Pieces out;
  pre.Apply(text, true, out);
  return out;
}

TEST(PreTokenizerTest, Gpt2Pattern) {
  EXPECT_EQ(Split(kGpt2SplitPattern, "Hello world, it's 2024!!  ok\n"),
            (Pieces{"Hello", " world", ",", " it", "'s", " 2024", "!!", " ", " ok", "\n"}));
  // Contractions are case-sensitive in GPT-2.
  EXPECT_EQ(Split(kGpt2SplitPattern, "IT'S"), (Pieces{"IT", "'", "S"}));
}

TEST(PreTokenizerTest, Qwen2PatternSplitsDigitsAndKeepsNewlinesTogether) {
  EXPECT_EQ(Split(kQwen2SplitPattern, "abc 12345 IT'S\n\n  x"),
            (Pieces{"abc", " ", "1", "2", "3", "4", "5", " IT", "'S", "\n\n", " ", " x"}));
  EXPECT_EQ(Split(kQwen2SplitPattern, "#include <stdio.h>"), (Pieces{"#include", " <", "stdio", ".h", ">"}));
  EXPECT_EQ(Split(kQwen2SplitPattern, "x;\r\n\ty"), (Pieces{"x", ";\r\n", "\ty"}));
}

TEST(PreTokenizerTest, Llama3PatternGroupsDigitsInThrees) {
  EXPECT_EQ(Split(kLlama3SplitPattern, "1234567 Ünïcödé"), (Pieces{"123", "456", "7", " Ünïcödé"}));
}

TEST(PreTokenizerTest, UnicodeClassesAndWhitespace) {
  // \p{L} covers every script; U+3000 is whitespace.
  EXPECT_EQ(Split(kQwen2SplitPattern, "日本語\u3000Δελτα"), (Pieces{"日本語", "\u3000Δελτα"}));
  EXPECT_EQ(Split(kGpt2SplitPattern, "a\u00a0b"), (Pieces{"a", "\u00a0", "b"}));
}

TEST(PreTokenizerTest, MalformedUtf8IsKeptAsItsOwnPieces) {
  std::string text = "ab\xff\xfe cd\xe6";
  Pieces pieces = Split(kQwen2SplitPattern, text);
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizerTest, LongRunsSplitWithoutBacktrackingBlowUp) {
  std::string spaces(200000, ' ');
  Pieces pieces = Split(kQwen2SplitPattern, spaces + "x");
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), 199999u);
  EXPECT_EQ(pieces[1], " x");
  std::string word(100000, 'q');
  EXPECT_EQ(Split(kLlama3SplitPattern, word), (Pieces{word}));
  std::string newlines(50000, '\n');
  EXPECT_EQ(Split(kQwen2SplitPattern, newlines + " y"), (Pieces{newlines, " y"}));
}

// The examples of Hugging Face's SplitDelimiterBehavior documentation.
TEST(PreTokenizerTest, DelimiterBehaviours) {
  const char* text = "the-final--countdown";
  EXPECT_EQ(Split("-", text, SplitBehavior::kRemoved), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(Split("-", text, SplitBehavior::kIsolated), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(Split("-", text, SplitBehavior::kMergedWithPrevious),
            (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(Split("-", text, SplitBehavior::kMergedWithNext), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(Split("-", text, SplitBehavior::kContiguous), (Pieces{"the", "-", "final", "--", "countdown"}));
  // Inverted: the matches are the pieces, the rest is the delimiter.
  EXPECT_EQ(Split(R"(\w+|[^\w\s]+)", "Hey friend!  ok", SplitBehavior::kRemoved, true),
            (Pieces{"Hey", "friend", "!", "ok"}));
}

TEST(PreTokenizerTest, LiteralPatternsMatchAsText) {
  auto regex = Regex::Compile("a.b", /*literal=*/true);
  ASSERT_TRUE(regex.ok()) << regex.status().ToString();
  PreTokenizer pre;
  pre.AddSplit(std::move(regex).value(), SplitBehavior::kRemoved, false);
  Pieces out;
  pre.Apply("xa.byaxbz", true, out);
  EXPECT_EQ(out, (Pieces{"x", "yaxbz"}));
}

TEST(PreTokenizerTest, Metaspace) {
  auto run = [](PrependScheme scheme, bool split, std::string_view text, bool at_start) {
    PreTokenizer pre;
    pre.AddMetaspace("\xE2\x96\x81", scheme, split);
    Pieces out;
    pre.Apply(text, at_start, out);
    return out;
  };
  EXPECT_EQ(run(PrependScheme::kAlways, true, "Hey friend", true), (Pieces{"▁Hey", "▁friend"}));
  EXPECT_EQ(run(PrependScheme::kAlways, false, "Hey  friend", false), (Pieces{"▁Hey▁▁friend"}));
  // An existing leading space serves as the prefix.
  EXPECT_EQ(run(PrependScheme::kAlways, false, " Hey", true), (Pieces{"▁Hey"}));
  EXPECT_EQ(run(PrependScheme::kFirst, false, "Hey", true), (Pieces{"▁Hey"}));
  EXPECT_EQ(run(PrependScheme::kFirst, false, "Hey", false), (Pieces{"Hey"}));
  EXPECT_EQ(run(PrependScheme::kNever, true, "a  b", true), (Pieces{"a", "▁", "▁b"}));
}

TEST(PreTokenizerTest, ByteLevelPrefixSpace) {
  PreTokenizer pre;
  ASSERT_TRUE(pre.AddByteLevel(/*add_prefix_space=*/true, /*use_regex=*/true).ok());
  Pieces out;
  pre.Apply("Hello world", true, out);
  EXPECT_EQ(out, (Pieces{" Hello", " world"}));
}

TEST(RegexTest, InvalidPatternIsAnError) {
  auto regex = Regex::Compile("(unclosed");
  ASSERT_FALSE(regex.ok());
  EXPECT_NE(regex.status().message().find("(unclosed"), std::string::npos);
}

TEST(RegexTest, CatastrophicPatternGivesUpInsteadOfHanging) {
  auto regex = Regex::Compile("(a+)+$");
  ASSERT_TRUE(regex.ok());
  std::string subject(64, 'a');
  subject += '!';
  size_t matches = 0;
  bool complete = regex->ForEachMatch(subject, [&](size_t, size_t) { ++matches; });
  // Either the budget stopped it or the engine was clever; it returned.
  EXPECT_TRUE(!complete || matches == 0);
}

}  // namespace pre_tokenizer_tests
}  // namespace kiln
