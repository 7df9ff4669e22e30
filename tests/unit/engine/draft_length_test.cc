// The adaptive draft length: full drafts while they are accepted, shorter
// ones as acceptance falls, a pause (growing on each failed probe) when it
// is near zero, and full drafts again once probes are accepted.
#include "engine/draft_length.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln {
namespace {

DraftLengthConfig Config(int32_t max_tokens = 6) {
  DraftLengthConfig c;
  c.max_tokens = max_tokens;
  c.min_gain = 0.25;
  c.smoothing = 0.3;
  c.pause_steps = 4;
  c.max_pause_steps = 16;
  return c;
}

TEST(DraftLengthTest, TheLengthIsTheLongestWorthVerifying) {
  const DraftLengthConfig c = Config();
  EXPECT_EQ(DraftLengthFor(1.0, c), 6);
  EXPECT_EQ(DraftLengthFor(0.95, c), 6);  // 0.95^6 = 0.74
  EXPECT_EQ(DraftLengthFor(0.8, c), 6);   // 0.8^6 = 0.26
  EXPECT_EQ(DraftLengthFor(0.7, c), 3);   // 0.7^3 = 0.34, 0.7^4 = 0.24
  EXPECT_EQ(DraftLengthFor(0.5, c), 2);   // exactly 0.25 at 2
  EXPECT_EQ(DraftLengthFor(0.3, c), 1);
  EXPECT_EQ(DraftLengthFor(0.2, c), 0);
  EXPECT_EQ(DraftLengthFor(0.0, c), 0);
  EXPECT_EQ(DraftLengthFor(0.99, Config(2)), 2);
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
  // in 3 tries each time, so acceptance tends to 2/3 and the length to
  // log(0.25) / log(2/3) = 3.4, that is 3.
  const DraftLengthConfig c = Config();
  DraftLength d;
  for (int i = 0; i < 60; ++i) d.Record(c, 6, 2);
  EXPECT_NEAR(d.acceptance(), 2.0 / 3.0, 1e-6);
  EXPECT_EQ(d.Next(c), 3);
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
  // 1 * 0.7^k < 0.25 from k = 4 verifications that found nothing.
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
  // Half the positions tried succeed: a length of 2.
  for (int i = 0; i < 40; ++i) d.Record(c, d.Next(c), 1);
  EXPECT_NEAR(d.acceptance(), 0.5, 1e-3);
  EXPECT_FALSE(d.paused());
  EXPECT_EQ(d.Next(c), 2);
}

}  // namespace
}  // namespace kiln
