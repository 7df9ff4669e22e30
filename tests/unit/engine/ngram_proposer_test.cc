// Prompt lookup: which earlier occurrence of the sequence's suffix is
// found, and what it proposes.
#include "engine/ngram_proposer.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace ngram_proposer_tests {

using Tokens = std::vector<int32_t>;

TEST(NgramProposerTest, ProposesWhatFollowedTheSuffixEarlier) {
  // The suffix "3 4" occurred at the start, followed by 5 6 7 8.
  Tokens tokens = {3, 4, 5, 6, 7, 8, 9, 3, 4};
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 2, .max_n = 2}, 3), (Tokens{5, 6, 7}));
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 2, .max_n = 2}, 10), (Tokens{5, 6, 7, 8, 9, 3, 4}));
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 2, .max_n = 2}, 0), Tokens{});
}

TEST(NgramProposerTest, TheLongestMatchingSuffixDecides) {
  // "2 9" occurred followed by 50; the longer "1 2 9" occurred followed by 60.
  Tokens tokens = {1, 2, 9, 60, 61, 7, 2, 9, 50, 51, 8, 1, 2, 9};
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 1, .max_n = 3}, 2), (Tokens{60, 61}));
  // With suffixes of at most two tokens the more recent "2 9" wins.
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 1, .max_n = 2}, 2), (Tokens{50, 51}));
}

TEST(NgramProposerTest, SuffixesShorterThanTheMinimumAreNotTried) {
  Tokens tokens = {5, 1, 2, 3, 4, 6, 7, 5};  // only the single token 5 recurs
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 2, .max_n = 4}, 4), Tokens{});
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 1, .max_n = 4}, 4), (Tokens{1, 2, 3, 4}));
}

TEST(NgramProposerTest, NothingRecursNothingProposed) {
  EXPECT_EQ(FindNgramDraft(Tokens{}, {.min_n = 1, .max_n = 3}, 4), Tokens{});
  EXPECT_EQ(FindNgramDraft(Tokens{7}, {.min_n = 1, .max_n = 3}, 4), Tokens{});
  EXPECT_EQ(FindNgramDraft(Tokens{1, 2, 3, 4, 5}, {.min_n = 1, .max_n = 3}, 4), Tokens{});
}

TEST(NgramProposerTest, TheMostRecentMatchWithAFullDraftIsPreferred) {
  // "1 2" at 0 (followed by 10 11 12 ...), at 5 (followed by 20 21 22 ...)
  // and at 10 (followed by 30 and the suffix itself: three tokens).
  Tokens tokens = {1, 2, 10, 11, 12, 1, 2, 20, 21, 22, 1, 2, 30, 1, 2};
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 2, .max_n = 2}, 3), (Tokens{30, 1, 2}));
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 2, .max_n = 2}, 4), (Tokens{20, 21, 22, 1}));
  // No match has twenty followers: the earliest has the most.
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 2, .max_n = 2}, 20),
            (Tokens{10, 11, 12, 1, 2, 20, 21, 22, 1, 2, 30, 1, 2}));
}

TEST(NgramProposerTest, ARepeatingRunProposesItsContinuation) {
  // A run of one token: its suffix matches one step back, and the draft
  // continues the run.
  Tokens tokens = {4, 8, 8, 8, 8, 8, 8};
  EXPECT_EQ(FindNgramDraft(tokens, {.min_n = 1, .max_n = 3}, 3), (Tokens{8, 8, 8}));
  // A period of three: the suffix "a b c" recurs three tokens back.
  Tokens cycle = {1, 2, 3, 1, 2, 3, 1, 2, 3};
  EXPECT_EQ(FindNgramDraft(cycle, {.min_n = 3, .max_n = 3}, 4), (Tokens{1, 2, 3, 1}));
}

TEST(NgramProposerTest, ProposeFillsEachSequencesDraft) {
  Sequence a(0, {1, 2, 3, 9, 1, 2}, SamplingParams{});
  Sequence b(1, {5, 6, 7}, SamplingParams{});
  b.draft = {42};  // a stale draft is replaced
  NgramProposer proposer({.min_n = 1, .max_n = 2});
  std::vector<DraftRequest> requests = {{&a, 2}, {&b, 4}};
  proposer.Propose(requests);
  EXPECT_EQ(a.draft, (Tokens{3, 9}));
  EXPECT_EQ(b.draft, Tokens{});
}

// A lookup guesses outright: it leaves no distribution rows (q is a point
// mass at each draft token).
TEST(NgramProposerTest, LeavesNoDistributionRows) {
  Sequence a(0, {1, 2, 3, 9, 1, 2}, SamplingParams{});
  a.draft_probs = {{0.5f}};  // stale rows are dropped
  NgramProposer proposer({.min_n = 1, .max_n = 2});
  std::vector<DraftRequest> requests = {{.seq = &a, .max_tokens = 2}};
  proposer.Propose(requests);
  ASSERT_EQ(a.draft, (Tokens{3, 9}));
  EXPECT_TRUE(a.draft_probs.empty());
}

}  // namespace ngram_proposer_tests
}  // namespace kiln
