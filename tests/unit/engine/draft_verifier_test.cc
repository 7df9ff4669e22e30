// Greedy verification of a draft against rows of logits made up here: how
// many draft tokens are accepted, which token the model adds, and that the
// sampler state advances token by token as plain decoding would.
#include "engine/draft_verifier.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace draft_verifier_tests {

constexpr int64_t kVocab = 8;

// One row per entry, each with its largest logit at the given token.
std::vector<float> RowsPreferring(const std::vector<int32_t>& tokens) {
  std::vector<float> rows(tokens.size() * kVocab, 0.0f);
  for (size_t r = 0; r < tokens.size(); ++r) rows[r * kVocab + static_cast<size_t>(tokens[r])] = 5.0f;
  return rows;
}

std::vector<int32_t> Tokens(const std::vector<SampleResult>& drawn) {
  std::vector<int32_t> ids;
  for (const SampleResult& r : drawn) ids.push_back(r.token);
  return ids;
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

TEST(DraftVerifierTest, AcceptsTheAgreeingPrefixAndAddsTheModelsToken) {
  SamplingParams params = Greedy();
  // The model wants 3 1 4 1 after the last token.
  const std::vector<int32_t> wanted = {3, 1, 4, 1};
  struct Case {
    std::vector<int32_t> draft, expected;
  };
  const Case cases[] = {
      {{3, 1, 4}, {3, 1, 4, 1}},  // all accepted, plus the model's next
      {{3, 1, 5}, {3, 1, 4}},     // the third differs: the model's replaces it
      {{2, 1, 4}, {3}},           // the first differs: plain decoding's one token
      {{3}, {3, 1}},
  };
  for (const Case& c : cases) {
    std::vector<float> rows = RowsPreferring({wanted.begin(), wanted.begin() + c.draft.size() + 1});
    SamplerState state = MakeSamplerState(params, {}, kVocab, 1);
    EXPECT_EQ(Tokens(VerifyDraft(rows.data(), kVocab, c.draft, {}, params, state)), c.expected);
  }
}

TEST(DraftVerifierTest, EachDrawSeesTheTokensAcceptedBeforeIt) {
  // A strong presence penalty: a token drawn once loses to the runner-up.
  // Every row prefers 2 over 6 by less than the penalty, so decoding one
  // token at a time gives 2 and then 6; a verifier that drew every row with
  // the state of the first would accept a second 2.
  SamplingParams params = Greedy();
  params.presence_penalty = 2.0;
  std::vector<float> rows(3 * kVocab, 0.0f);
  for (size_t r = 0; r < 3; ++r) {
    rows[r * kVocab + 2] = 4.0f;
    rows[r * kVocab + 6] = 3.0f;
  }
  SamplerState state = MakeSamplerState(params, {}, kVocab, 1);
  EXPECT_EQ(Tokens(VerifyDraft(rows.data(), kVocab, std::vector<int32_t>{2, 2}, {}, params, state)),
            (std::vector<int32_t>{2, 6}));
  // Both drawn tokens are in the state, as after two plain steps.
  EXPECT_EQ(state.output_counts.at(2), 1);
  EXPECT_EQ(state.output_counts.at(6), 1);
}

TEST(DraftVerifierTest, LogprobsAreOfEachRow) {
  SamplingParams params = Greedy();
  params.logprobs = true;
  std::vector<float> rows = RowsPreferring({5, 7});
  rows[kVocab + 7] = 9.0f;  // the second row is more certain
  SamplerState state = MakeSamplerState(params, {}, kVocab, 1);
  std::vector<SampleResult> drawn =
      VerifyDraft(rows.data(), kVocab, std::vector<int32_t>{5}, {}, params, state);
  ASSERT_EQ(drawn.size(), 2u);
  EXPECT_EQ(drawn[1].token, 7);
  EXPECT_LT(drawn[0].logprob, drawn[1].logprob);
  EXPECT_LT(drawn[1].logprob, 0.0f);
}

// With a grammar, each row's mask applies: a draft token the model prefers
// but the row's mask forbids is rejected, and the model's best allowed
// token replaces it, as masked plain decoding would choose.
TEST(DraftVerifierTest, EachRowDrawsOnlyWhatItsMaskAllows) {
  SamplingParams params = Greedy();
  std::vector<float> rows = RowsPreferring({3, 1, 4});
  rows[kVocab + 6] = 2.0f;  // row 1's runner-up
  const std::vector<uint32_t> all = {0xffu}, not_one = {0xffu & ~(1u << 1)};
  const std::vector<uint32_t>* masks[] = {&all, &not_one, &all};
  DraftContext context;
  context.masks = masks;
  SamplerState state = MakeSamplerState(params, {}, kVocab, 1);
  EXPECT_EQ(Tokens(VerifyDraft(rows.data(), kVocab, std::vector<int32_t>{3, 1}, context, params, state)),
            (std::vector<int32_t>{3, 6}));

  // A mask that allows nothing ends the tokens with -1.
  const std::vector<uint32_t> none = {0u};
  const std::vector<uint32_t>* dead[] = {&all, &none, &all};
  context.masks = dead;
  rows = RowsPreferring({3, 1, 4});
  state = MakeSamplerState(params, {}, kVocab, 1);
  EXPECT_EQ(Tokens(VerifyDraft(rows.data(), kVocab, std::vector<int32_t>{3, 1}, context, params, state)),
            (std::vector<int32_t>{3, -1}));
}

}  // namespace draft_verifier_tests
}  // namespace kiln
