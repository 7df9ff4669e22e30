// Token masks and GrammarConstraint: a hand-made vocabulary (split UTF-8
// characters, duplicate pieces, end tokens) and Qwen2.5's real one.
#include "grammar/token_grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "core/utf8.h"
#include "grammar/grammar_constraint.h"
#include "grammar_test_util.h"
#include "testing/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace token_grammar_tests {

using testing::Matches;
using testing::ParseOrDie;

bool Bit(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[id / 32] >> (id % 32)) & 1u;
}

std::vector<int32_t> Allowed(const std::vector<uint32_t>& mask, int32_t vocab_size) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (Bit(mask, id)) ids.push_back(id);
  }
  return ids;
}

// ids:            0    1    2     3     4       5       6         7    8     9
const std::vector<std::string> kPieces = {"a", "b", "ab", "ba", "\xC3", "\xA9", "\xC3\xA9", "", "a", "bb"};
constexpr int32_t kEnd = 7;

std::shared_ptr<const TokenGrammar> SmallTokenGrammar(std::string_view gbnf) {
  auto vocab = std::make_shared<GrammarVocabulary>(kPieces, std::vector<int32_t>{kEnd});
  return std::make_shared<TokenGrammar>(ParseOrDie(gbnf), vocab);
}

TEST(TokenGrammar, MaskFollowsTheGrammar) {
  GrammarConstraint c(SmallTokenGrammar(R"gbnf(root ::= "a"+ "b")gbnf"));
  std::vector<uint32_t> mask;
  c.FillMask(&mask);
  EXPECT_EQ(Allowed(mask, 10), (std::vector<int32_t>{0, 2, 8}));  // a, ab and the duplicate a
  ASSERT_TRUE(c.Accept(0));
  c.FillMask(&mask);
  EXPECT_EQ(Allowed(mask, 10), (std::vector<int32_t>{0, 1, 2, 8}));
  EXPECT_FALSE(c.Accept(3));  // "ba" would continue after the final b
  EXPECT_FALSE(c.Accept(kEnd));
  ASSERT_TRUE(c.Accept(1));
  c.FillMask(&mask);
  EXPECT_EQ(Allowed(mask, 10), (std::vector<int32_t>{kEnd}));
  EXPECT_TRUE(c.CanEnd());
  ASSERT_TRUE(c.Accept(kEnd));
  EXPECT_TRUE(c.finished());
  c.FillMask(&mask);
  EXPECT_TRUE(Allowed(mask, 10).empty());
}

TEST(TokenGrammar, TokensSplittingACharacter) {
  GrammarConstraint c(SmallTokenGrammar(R"gbnf(root ::= "é"+)gbnf"));
  std::vector<uint32_t> mask;
  c.FillMask(&mask);
  EXPECT_EQ(Allowed(mask, 10), (std::vector<int32_t>{4, 6}));
  ASSERT_TRUE(c.Accept(4));
  EXPECT_FALSE(c.CanEnd());  // half a character
  c.FillMask(&mask);
  EXPECT_EQ(Allowed(mask, 10), (std::vector<int32_t>{5}));
  ASSERT_TRUE(c.Accept(5));
  c.FillMask(&mask);
  EXPECT_EQ(Allowed(mask, 10), (std::vector<int32_t>{4, 6, kEnd}));
}

TEST(TokenGrammar, RollbackRestoresEarlierStates) {
  GrammarConstraint c(SmallTokenGrammar(R"gbnf(root ::= ("a" | "b")* "é")gbnf"));
  ASSERT_TRUE(c.Accept(0));
  std::vector<uint32_t> after_a;
  c.FillMask(&after_a);
  ASSERT_TRUE(c.Accept(3));
  ASSERT_TRUE(c.Accept(6));
  ASSERT_TRUE(c.Accept(kEnd));
  EXPECT_FALSE(c.Rollback(5));
  ASSERT_TRUE(c.Rollback(3));
  EXPECT_FALSE(c.finished());
  std::vector<uint32_t> mask;
  c.FillMask(&mask);
  EXPECT_EQ(mask, after_a);
  ASSERT_TRUE(c.Accept(4));
  ASSERT_TRUE(c.Rollback(1));
  EXPECT_FALSE(c.Accept(5));  // the pending byte is gone with the rollback
  EXPECT_TRUE(c.Rollback(0));
}

TEST(TokenGrammar, MaskAgreesWithIsAllowed) {
  auto tg = SmallTokenGrammar(R"gbnf(root ::= ("ab" | "bb" | [^a]{2})+)gbnf");
  GrammarConstraint c(tg);
  std::mt19937 rng(7);
  for (int step = 0; step < 30; ++step) {
    std::vector<uint32_t> mask;
    c.FillMask(&mask);
    for (int32_t id = 0; id < 10; ++id) EXPECT_EQ(Bit(mask, id), c.IsAllowed(id)) << "id " << id;
    std::vector<int32_t> allowed = Allowed(mask, 10);
    if (allowed.empty()) break;
    int32_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(c.Accept(pick));
    if (c.finished()) break;
  }
}

TEST(TokenGrammar, DeadEndIsReported) {
  GrammarConstraint c(SmallTokenGrammar(R"gbnf(root ::= "a" "z")gbnf"));
  EXPECT_FALSE(c.IsDeadEnd());
  ASSERT_TRUE(c.Accept(0));
  EXPECT_TRUE(c.IsDeadEnd());  // no token writes "z"
}

std::unique_ptr<Tokenizer> QwenTokenizer() {
  auto tok = LoadTokenizer(testing::SharedDir() + "/data/tokenizers/qwen2.5");
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(TokenGrammarQwen, TokenBytesMatchTheTokenizer) {
  auto tok = QwenTokenizer();
  ASSERT_NE(tok, nullptr);
  auto vocab = GrammarVocabulary::FromTokenizer(*tok);
  ASSERT_EQ(vocab->size(), tok->vocab_size());
  int checked = 0;
  for (int32_t id = 0; id < tok->vocab_size(); id += 7) {
    if (tok->IsSpecial(id) || vocab->IsEnd(id)) continue;
    const std::string& bytes = vocab->bytes(id);
    if (!IsValidUtf8(bytes)) continue;  // Decode would write U+FFFD
    std::vector<int32_t> one = {id};
    ASSERT_EQ(bytes, tok->Decode(one, false)) << "id " << id;
    ++checked;
  }
  EXPECT_GT(checked, 15000);
  EXPECT_TRUE(vocab->IsEnd(151645));  // <|im_end|>
}

TEST(TokenGrammarLlama2, SentencePieceBytes) {
  auto tok = LoadTokenizer(testing::SharedDir() + "/data/tokenizers/llama2");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto vocab = GrammarVocabulary::FromTokenizer(**tok);
  EXPECT_EQ(vocab->bytes(3 + 0x0A), "\n");  // <0x0A>
  EXPECT_EQ(vocab->bytes(3 + 0xE4), "\xE4");
  EXPECT_EQ(vocab->bytes((*tok)->Encode("the", false).back()), " the");  // "▁the"
  EXPECT_TRUE(vocab->bytes(1).empty());                                  // <s>
  EXPECT_TRUE(vocab->IsEnd(2));                                          // </s>

  auto grammar = ParseOrDie(R"gbnf(root ::= " 東京" [0-9]+ "\n")gbnf");
  GrammarConstraint c(std::make_shared<TokenGrammar>(grammar, vocab));
  // 東 (E6 9D B1) spelled with byte pieces must be allowed one byte at a time.
  for (int32_t id : {29871 /* "▁" */, 3 + 0xE6, 3 + 0x9D, 3 + 0xB1}) {
    ASSERT_TRUE(c.Accept(id)) << id << " " << vocab->bytes(id);
  }
}

// Walks random allowed tokens, leaning towards ending, and returns the text.
std::string RandomWalk(GrammarConstraint& c, const GrammarVocabulary& vocab, std::mt19937& rng, int max_steps,
                       std::string_view closers) {
  std::string text;
  std::vector<uint32_t> mask;
  for (int step = 0; step < max_steps && !c.finished(); ++step) {
    c.FillMask(&mask);
    std::vector<int32_t> allowed = Allowed(mask, vocab.size());
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after: " << text;
      break;
    }
    // Later in the walk, prefer ending and the characters that close things,
    // so that the walk finishes.
    std::vector<int32_t> preferred;
    if (static_cast<int>(rng() % 100) < step) {
      for (int32_t id : allowed) {
        if (vocab.IsEnd(id) ||
            (vocab.bytes(id).size() == 1 && closers.find(vocab.bytes(id)[0]) != std::string::npos)) {
          preferred.push_back(id);
        }
      }
    }
    const std::vector<int32_t>& pool = preferred.empty() ? allowed : preferred;
    int32_t pick = pool[rng() % pool.size()];
    EXPECT_TRUE(c.IsAllowed(pick));
    EXPECT_TRUE(c.Accept(pick));
    if (!vocab.IsEnd(pick)) text += vocab.bytes(pick);
  }
  return text;
}

TEST(TokenGrammarQwen, RandomWalksProduceSentencesOfTheGrammar) {
  auto tok = QwenTokenizer();
  ASSERT_NE(tok, nullptr);
  auto vocab = GrammarVocabulary::FromTokenizer(*tok);
  const char* grammars[] = {
      R"gbnf(root ::= "Answer: " ("yes" | "no") "." )gbnf",
      R"gbnf(root ::= [a-z]+ (" " [a-z]+){0,5} "!")gbnf",
      R"gbnf(root ::= "<" [0-9]{1,3} ("," [0-9]{1,3})* ">")gbnf",
      R"gbnf(root ::= "名前: " [^\n]{1,8} "\n")gbnf",
  };
  std::mt19937 rng(1234);
  for (const char* gbnf : grammars) {
    auto grammar = ParseOrDie(gbnf);
    auto tg = std::make_shared<TokenGrammar>(grammar, vocab);
    for (int walk = 0; walk < 5; ++walk) {
      GrammarConstraint c(tg);
      std::string text = RandomWalk(c, *vocab, rng, 200, "!.>\n");
      EXPECT_TRUE(c.finished()) << gbnf << "\n" << text;
      EXPECT_TRUE(Matches(grammar, text)) << gbnf << "\n" << text;
    }
  }
}

}  // namespace token_grammar_tests
}  // namespace kiln

namespace kiln {
namespace token_grammar_tests {

// The numbered-state walk against the plain one, at every state of random
// walks through grammars whose strings loop (JSON), count (bounded
// repetitions) and branch (alternatives).
TEST(TokenGrammarQwen, MasksEqualThePlainWalk) {
  auto tok = QwenTokenizer();
  ASSERT_NE(tok, nullptr);
  auto vocab = GrammarVocabulary::FromTokenizer(*tok);
  const char* grammars[] = {
      R"gbnf(root ::= "{\"a\": \"" [^"\\]* "\", \"b\": " [0-9]{1,4} "}")gbnf",
      R"gbnf(root ::= [a-z ]{0,12} ("!" | "?"))gbnf",
      R"gbnf(root ::= ("cat" | "car" | "cart" | [0-9]+) (", " root)?)gbnf",
      R"gbnf(root ::= "名前: " [^\n]{1,8} "\n")gbnf",
      R"gbnf(root ::= ([一-龥] | [ぁ-ん] | [a-z] | "é")+ "。")gbnf",
  };
  std::mt19937 rng(99);
  int states = 0;
  for (const char* gbnf : grammars) {
    auto grammar = ParseOrDie(gbnf);
    GrammarMatcher matcher(grammar);
    for (int step = 0; step < 30; ++step) {
      TokenGrammar fresh(grammar, vocab);  // nothing cached
      std::vector<uint32_t> mask;
      fresh.FillMask(matcher.state(), &mask);
      std::vector<uint32_t> plain(fresh.MaskWords(), 0);
      fresh.ComputeMaskStepByStep(matcher.state(), &plain);
      if (matcher.CanEnd()) {
        for (int32_t id : vocab->end_ids()) plain[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
      }
      ASSERT_EQ(mask, plain) << gbnf << " after " << step << " tokens";
      ++states;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->size(); ++id) {
        if (((mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u) && !vocab->IsEnd(id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      ASSERT_TRUE(matcher.AcceptBytes(vocab->bytes(allowed[rng() % allowed.size()])));
    }
  }
  EXPECT_GT(states, 30);
}

}  // namespace token_grammar_tests
}  // namespace kiln
