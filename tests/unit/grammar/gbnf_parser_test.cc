// GBNF parsing: the notation's features and the errors for bad grammars.
#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>

#include "grammar_test_util.h"

namespace kiln {
namespace gbnf_parser_tests {

using testing::Matches;
using testing::ParseOrDie;

TEST(GbnfParser, LiteralsAndAlternation) {
  auto g = ParseOrDie(R"gbnf(root ::= "yes" | "no")gbnf");
  EXPECT_TRUE(Matches(g, "yes"));
  EXPECT_TRUE(Matches(g, "no"));
  EXPECT_FALSE(Matches(g, "ye"));
  EXPECT_FALSE(Matches(g, "yesno"));
}

TEST(GbnfParser, EscapesInLiterals) {
  auto g = ParseOrDie(R"gbnf(root ::= "a\nb\t\"\\\x41\u00e9\U0001F600\r")gbnf");
  EXPECT_TRUE(Matches(g, "a\nb\t\"\\A\xC3\xA9\xF0\x9F\x98\x80\r"));
}

TEST(GbnfParser, CharacterClasses) {
  auto g = ParseOrDie(R"gbnf(root ::= [a-c0-9_] [^x-z\]] .)gbnf");
  EXPECT_TRUE(Matches(g, "aq!"));
  EXPECT_FALSE(Matches(g, "5]\xC3\xA9"));  // ']' is excluded by the negated class
  EXPECT_TRUE(Matches(g, "_a\xC3\xA9"));
  EXPECT_FALSE(Matches(g, "dab"));
  EXPECT_FALSE(Matches(g, "ayb"));
}

TEST(GbnfParser, Repetitions) {
  auto g = ParseOrDie(R"gbnf(
    root ::= "a"* "b"+ "c"? d{2} e{1,} f{0,2}
    d ::= "d"
    e ::= "e"
    f ::= "f"
  )gbnf");
  EXPECT_TRUE(Matches(g, "bdde"));
  EXPECT_TRUE(Matches(g, "aaabbbcddeeeff"));
  EXPECT_FALSE(Matches(g, "dde"));      // no b
  EXPECT_FALSE(Matches(g, "bde"));      // one d
  EXPECT_FALSE(Matches(g, "bdd"));      // no e
  EXPECT_FALSE(Matches(g, "bddefff"));  // three f
}

TEST(GbnfParser, GroupsAndMultiLineRules) {
  auto g = ParseOrDie(R"gbnf(# a comment
root ::=
  "[" ws ( item ("," ws item)* )? "]"   # list
item ::= [0-9]+
  | "x"
ws ::= [ \t\n]*
)gbnf");
  EXPECT_TRUE(Matches(g, "[]"));
  EXPECT_TRUE(Matches(g, "[ 1, 22,x]"));
  EXPECT_FALSE(Matches(g, "[1,]"));
}

TEST(GbnfParser, RecursiveRules) {
  auto g = ParseOrDie(R"gbnf(root ::= "(" root ")" | "")gbnf");
  EXPECT_TRUE(Matches(g, ""));
  EXPECT_TRUE(Matches(g, "((()))"));
  EXPECT_FALSE(Matches(g, "(()"));
}

TEST(GbnfParser, LongRepetitionDoesNotGrowTheStack) {
  auto g = ParseOrDie(R"gbnf(root ::= [a]*)gbnf");
  GrammarMatcher m(g);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(m.AcceptCodePoint('a'));
  EXPECT_TRUE(m.CanEnd());
  for (const auto& stack : m.state().stacks) EXPECT_LE(stack.size(), 2u);
}

struct BadGrammar {
  const char* gbnf;
  const char* error;
};

class GbnfParserErrors : public ::testing::TestWithParam<BadGrammar> {};

TEST_P(GbnfParserErrors, NameLineColumnAndProblem) {
  Expected<Grammar> g = ParseGbnf(GetParam().gbnf);
  ASSERT_FALSE(g.ok()) << GetParam().gbnf;
  EXPECT_NE(g.status().message().find(GetParam().error), std::string::npos)
      << g.status().message() << "\nexpected: " << GetParam().error;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GbnfParserErrors,
    ::testing::Values(
        BadGrammar{"", "the grammar is empty"},
        BadGrammar{"root ::= \"abc", "line 1, column 10: unterminated string literal"},
        BadGrammar{"root ::= [a-", "line 1, column 10: unterminated character class"},
        BadGrammar{"root ::= [z-a]", "end before its start"},
        BadGrammar{"root ::= foo", "line 1, column 10: rule 'foo' is used but never defined"},
        BadGrammar{"item ::= \"a\"", "no 'root' rule"},
        BadGrammar{"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
        BadGrammar{"root ::= (\"a\"", "expected ')'"}, BadGrammar{"root ::= \"a\")", "unbalanced ')'"},
        BadGrammar{"root ::= * \"a\"", "does not follow anything"},
        BadGrammar{"root ::= \"a\"{3,1}", "max below min"},
        BadGrammar{"root ::= \"a\"{99999999}", "exceeds the limit"},
        BadGrammar{"root ::= \"\\q\"", "unknown escape"}, BadGrammar{"root ::= \"\\x4\"", "hex digits"},
        BadGrammar{"root ::= \"\\U00110000\"", "beyond U+10FFFF"},
        BadGrammar{"root ::= \"a\" !", "line 1, column 14: unexpected character '!'"},
        BadGrammar{"root ::= root \"a\" | \"b\"", "'root' is left-recursive"},
        BadGrammar{"root ::= x \"a\"\nx ::= \"\" | root", "left-recursive"},
        BadGrammar{"root ::= (\"\")* \"a\"", "left-recursive"},
        BadGrammar{"root \"a\"", "expected '::=' after rule name 'root'"},
        BadGrammar{"root ::= \"\xff\"", "invalid UTF-8"}));

TEST(GbnfParser, NestingDepthIsLimited) {
  std::string gbnf = "root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')');
  Expected<Grammar> g = ParseGbnf(gbnf);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested deeper than"), std::string::npos);
}

TEST(GbnfParser, ExpansionSizeIsLimited) {
  std::string gbnf = "root ::= r0\n";
  for (int i = 0; i < 200; ++i) gbnf += fmt::format("r{} ::= \"x\"{{10000}}\n", i);
  Expected<Grammar> g = ParseGbnf(gbnf);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("too large"), std::string::npos) << g.status().message();
}

}  // namespace gbnf_parser_tests
}  // namespace kiln

namespace kiln {
namespace gbnf_parser_tests {

// The layout llama.cpp's published grammars use: rules continued over lines
// after `::=`, `|` and inside parentheses, comments at line ends, an empty
// first alternative, quotes unescaped inside classes.
TEST(GbnfParser, LlamaCppStyleJsonGrammar) {
  auto g = testing::ParseOrDie(R"gbnf(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)gbnf");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(testing::Matches(g, R"({"a": [1, -2.5e3, "x\n\u00e9", {}], "b": null})"));
  EXPECT_TRUE(testing::Matches(g, "{\n  \"k\": true\n}"));
  EXPECT_FALSE(testing::Matches(g, R"({"a": })"));
  EXPECT_FALSE(testing::Matches(g, R"({"a": "\q"})"));
}

TEST(GbnfParser, TooManyOpenParsesAreRefusedNotExplored) {
  // After n a's every sequence of n closing letters is still open: 2^n
  // distinct stacks (times the ways to go on), past kMaxGrammarStacks by n = 13.
  auto g = testing::ParseOrDie(R"gbnf(root ::= "a" root "b" | "a" root "c" | "")gbnf");
  EXPECT_TRUE(testing::Matches(g, "aaabcb"));
  EXPECT_TRUE(testing::IsPrefix(g, std::string(9, 'a')));
  EXPECT_FALSE(testing::IsPrefix(g, std::string(13, 'a')));
}

TEST(GbnfParser, AmbiguousGrammarsKeepEveryParse) {
  auto g = testing::ParseOrDie(R"gbnf(root ::= ("a" | "ab") ("bc" | "c"))gbnf");
  EXPECT_TRUE(testing::Matches(g, "abc"));
  EXPECT_TRUE(testing::Matches(g, "ac"));
  EXPECT_TRUE(testing::Matches(g, "abbc"));
  EXPECT_FALSE(testing::Matches(g, "ab"));
}

}  // namespace gbnf_parser_tests
}  // namespace kiln
