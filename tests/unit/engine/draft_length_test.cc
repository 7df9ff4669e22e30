// The adaptive draft length: the k that yields the most tokens per unit of
// cost, (1 + a + ... + a^k) / (1 + k * (row + draft)), for hand-computed
// cases; full drafts while they are accepted and cheap, shorter ones as
// acceptance falls or drafting costs more, a pause (growing on each failed
// probe) when no draft pays, and full drafts again once probes are
// accepted.
#include "engine/draft_length.h"

#include <gtest/gtest.h>

namespace kiln {
namespace draft_length_tests {

DraftLengthConfig Config(int32_t max_tokens = 6) {
  DraftLengthConfig c;
  c.max_tokens = max_tokens;
  c.row_cost = 0.25;  // the engine's guesses without measurements
  c.draft_cost = 0;
  c.smoothing = 0.3;
  c.pause_steps = 4;
  c.max_pause_steps = 16;
  return c;
}

DraftLengthConfig Costs(double row, double draft, int32_t max_tokens = 6) {
  DraftLengthConfig c = Config(max_tokens);
  c.row_cost = row;
  c.draft_cost = draft;
  return c;
}

TEST(DraftLengthTest, TheLengthYieldsTheMostTokensPerCost) {
  // A q4_0 draft of the model itself: a draft pass 0.55 of a plain pass, a
  // verified row 0.4. At 90% acceptance one draft token yields 1.9 tokens
  // for 1.95 passes: none pays.
  EXPECT_EQ(DraftLengthFor(0.9, Costs(0.4, 0.55)), 0);
  EXPECT_EQ(DraftLengthFor(0.97, Costs(0.4, 0.55)), 1);  // 1.97 / 1.95 = 1.010, then 2.911 / 2.9 = 1.004
  EXPECT_EQ(DraftLengthFor(0.99, Costs(0.4, 0.55)), 2);  // 1.0205, 1.0242, then 1.0235
  EXPECT_EQ(DraftLengthFor(1.0, Costs(0.4, 0.55)), 6);   // (k + 1) / (1 + 0.95 k) grows
  // Cheap rows and free drafts (prompt lookup): every token pays.
  EXPECT_EQ(DraftLengthFor(0.9, Costs(0.1, 0)), 6);
  EXPECT_EQ(DraftLengthFor(0.5, Costs(0, 0)), 6);
  EXPECT_EQ(DraftLengthFor(0.0, Costs(0, 0)), 0);  // nothing beats one token per pass
  // a = 0.8 at 0.3 a token: 1.38, 1.525, 1.554, then 1.528 at 4.
  EXPECT_EQ(DraftLengthFor(0.8, Costs(0.2, 0.1)), 3);
  EXPECT_EQ(DraftLengthFor(0.9, Costs(0.1, 0, 2)), 2);  // never past max_tokens
}

TEST(DraftLengthTest, WithoutMeasuredCostsAFixedRowCostDecides) {
  // Rows at 0.25 of a pass, drafts free: a draft pays above 25% acceptance,
  // and longer ones as acceptance grows.
  const DraftLengthConfig c = Config();
  EXPECT_EQ(DraftLengthFor(1.0, c), 6);
  EXPECT_EQ(DraftLengthFor(0.95, c), 6);  // 2.35 at 5, 2.41 at 6
  EXPECT_EQ(DraftLengthFor(0.8, c), 3);   // 1.687 at 3, 1.681 at 4
  EXPECT_EQ(DraftLengthFor(0.7, c), 2);   // 1.46 at 2, 1.447 at 3
  EXPECT_EQ(DraftLengthFor(0.5, c), 1);   // 1.2 at 1, 1.167 at 2
  EXPECT_EQ(DraftLengthFor(0.3, c), 1);
  EXPECT_EQ(DraftLengthFor(0.25, c), 0);  // 1.25 / 1.25: no better than none
  EXPECT_EQ(DraftLengthFor(0.2, c), 0);
  EXPECT_EQ(DraftLengthFor(0.0, c), 0);
  EXPECT_EQ(DraftLengthFor(0.99, Config(2)), 2);
}

TEST(DraftLengthTest, CostlyDraftsPauseWhereCheapOnesWouldNot) {
  // Three of every four draft tokens accepted: worth drafting when drafts
  // are free, not when a draft pass costs 0.55 of a plain one.
  const DraftLengthConfig cheap = Costs(0.4, 0);
  const DraftLengthConfig costly = Costs(0.4, 0.55);
  DraftLength a;
  DraftLength b;
  for (int i = 0; i < 20; ++i) {
    if (!a.paused()) a.Record(cheap, 4, 3);
    if (!b.paused()) b.Record(costly, 4, 3);
  }
  EXPECT_NEAR(a.acceptance(), 0.75, 1e-3);
  EXPECT_FALSE(a.paused());
  EXPECT_GT(a.Next(cheap), 0);
  EXPECT_TRUE(b.paused());
  EXPECT_EQ(b.Next(costly), 0);
}

TEST(DraftLengthTest, WhereResumingIsCostlyASequenceStopsForGoodOnceJudged) {
  // A draft model must catch up before drafting again: no pause, a stop,
  // but only after min_verifications_to_stop verifications; until then a
  // sequence whose drafts do not pay drafts one token a step.
  DraftLengthConfig c = Costs(0.4, 0.55, 4);
  c.stop_instead_of_pause = true;
  c.min_verifications_to_stop = 3;
  DraftLength d;
  EXPECT_EQ(d.Next(c), 4);  // optimistic at first
  EXPECT_FALSE(d.Record(c, 4, 0));
  EXPECT_FALSE(d.paused());
  EXPECT_EQ(d.Next(c), 1);  // does not pay: one token until judged
  EXPECT_FALSE(d.Record(c, 1, 0));
  EXPECT_EQ(d.Next(c), 1);
  EXPECT_TRUE(d.Record(c, 1, 0));  // the third: stops, and says so once
  EXPECT_TRUE(d.stopped());
  for (int i = 0; i < 300; ++i) ASSERT_EQ(d.Next(c), 0) << i;
  EXPECT_FALSE(d.Record(c, 4, 4));  // nothing moves it once stopped
  EXPECT_TRUE(d.stopped());
  EXPECT_EQ(d.Next(c), 0);

  // Drafts that pay never stop it.
  DraftLength good;
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(good.Record(c, 4, 4));
  EXPECT_FALSE(good.stopped());
  EXPECT_EQ(good.Next(c), 4);
}

TEST(DraftLengthTest, CostsNoAcceptanceCouldPayForStopAWouldBeDrafterAtOnce) {
  // A row and a draft token costing 1.1 of a plain pass together: even a
  // draft accepted whole yields k + 1 tokens for 1 + 1.1 k passes.
  DraftLengthConfig c = Costs(0.4, 0.7, 4);
  c.stop_instead_of_pause = true;
  EXPECT_EQ(DraftLengthFor(1.0, c), 0);
  DraftLength unsettled;
  EXPECT_EQ(unsettled.Next(c), 1);  // the costs may still be the first, cold samples
  EXPECT_FALSE(unsettled.stopped());
  c.costs_settled = true;
  DraftLength settled;
  EXPECT_EQ(settled.Next(c), 0);
  EXPECT_TRUE(settled.stopped());
  // Where a whole draft would pay, a new sequence drafts in full.
  DraftLength cheap;
  EXPECT_EQ(cheap.Next(Costs(0.2, 0.3, 4)), 4);
  // Prompt lookup pauses rather than stopping, whatever the costs.
  c.stop_instead_of_pause = false;
  DraftLength lookup;
  EXPECT_EQ(lookup.Next(c), 1);
  EXPECT_FALSE(lookup.stopped());
}

TEST(DraftLengthTest, ANewSequenceDraftsInFullAndKeepsDoingSoWhileAccepted) {
  const DraftLengthConfig c = Config();
  DraftLength d;
  EXPECT_EQ(d.Next(c), 6);
  for (int i = 0; i < 20; ++i) {
    d.Record(c, 6, 6);
    EXPECT_EQ(d.Next(c), 6);
  }
  EXPECT_DOUBLE_EQ(d.acceptance(), 1.0);
}

TEST(DraftLengthTest, AcceptanceIsEstimatedPerPositionTried) {
  // Every draft accepted up to its third token, then rejected: 2 successes
  // in 3 tries each time, so acceptance tends to 2/3, and at a quarter of a
  // pass a row the length to 2 (1.333, 1.407, then 1.376 at 3).
  const DraftLengthConfig c = Config();
  DraftLength d;
  for (int i = 0; i < 60; ++i) d.Record(c, 6, 2);
  EXPECT_NEAR(d.acceptance(), 2.0 / 3.0, 1e-6);
  EXPECT_EQ(d.Next(c), 2);
}

TEST(DraftLengthTest, NearZeroAcceptancePausesThenProbesWithOneToken) {
  const DraftLengthConfig c = Config();
  DraftLength d;
  int rejected = 0;
  while (!d.paused()) {
    ASSERT_GT(d.Next(c), 0);
    d.Record(c, 4, 0);
    ++rejected;
    ASSERT_LT(rejected, 10);
  }
  // Acceptance 0.7^k after k verifications that found nothing; no draft
  // pays at 0.25 a row once it is below 0.25, from k = 4.
  EXPECT_EQ(rejected, 4);
  for (int i = 0; i < c.pause_steps; ++i) EXPECT_EQ(d.Next(c), 0) << i;
  EXPECT_EQ(d.Next(c), 1);  // the probe
  // A failed probe pauses twice as long, then four times, up to the cap.
  for (int pause : {8, 16, 16}) {
    d.Record(c, 1, 0);
    for (int i = 0; i < pause; ++i) ASSERT_EQ(d.Next(c), 0) << pause << " " << i;
    ASSERT_EQ(d.Next(c), 1);
  }
  // Accepted probes lift acceptance back and the length with it.
  int steps = 0;
  while (d.Next(c) < c.max_tokens) {
    d.Record(c, 1, 1);
    ASSERT_LT(++steps, 30);
  }
  EXPECT_FALSE(d.paused());
  // The pause length started over: the next collapse pauses pause_steps.
  while (!d.paused()) d.Record(c, 6, 0);
  int paused_for = 0;
  while (d.Next(c) == 0) ++paused_for;
  EXPECT_EQ(paused_for, c.pause_steps);
}

TEST(DraftLengthTest, PartialAcceptanceShortensWithoutPausing) {
  const DraftLengthConfig c = Config();
  DraftLength d;
  // Half the positions tried succeed (one accepted, then a miss): a length
  // of 1 (1.2 tokens per pass, 1.167 at 2).
  for (int i = 0; i < 40; ++i) d.Record(c, 4, 1);
  EXPECT_NEAR(d.acceptance(), 0.5, 1e-3);
  EXPECT_FALSE(d.paused());
  EXPECT_EQ(d.Next(c), 1);
}

}  // namespace draft_length_tests
}  // namespace kiln
