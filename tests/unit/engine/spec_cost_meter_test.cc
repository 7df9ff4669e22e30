// The cost meter: plain passes timed per batch size (asked for when a
// batch size has none yet, soon again, then once in plain_every steps),
// the row cost from passes with drafts against them, the draft cost from
// the time spent drafting each token, each a moving average of
// per-sequence shares that starts at its first sample and follows lower
// samples faster than higher ones (the plain time takes a lower one
// whole); nothing is measured against a plain pass not yet timed.
#include "engine/spec_cost_meter.h"

#include <gtest/gtest.h>

namespace kiln {
namespace spec_cost_meter_tests {

SpecCostConfig Config() {
  SpecCostConfig c;
  c.smoothing_down = 0.5;
  c.smoothing_up = 0.1;
  c.second_plain_after = 4;
  c.plain_every = 8;
  c.initial_row_cost = 0.25;
  c.initial_draft_cost = 0;
  return c;
}

TEST(SpecCostMeterTest, PlainPassesAreAskedForPerBatchSizeAndNowAndThen) {
  SpecCostMeter m(Config());
  EXPECT_TRUE(m.WantsPlainPass(1));  // nothing timed yet
  m.RecordPass(1, 0, 0.020);  // the first, cold
  EXPECT_DOUBLE_EQ(m.plain_seconds(1), 0.020);
  for (int i = 1; i < 4; ++i) EXPECT_FALSE(m.WantsPlainPass(1)) << i;
  EXPECT_TRUE(m.WantsPlainPass(1));  // the second soon after
  m.RecordPass(1, 0, 0.010);
  EXPECT_DOUBLE_EQ(m.plain_seconds(1), 0.010);  // a shorter plain pass is taken whole
  for (int i = 1; i < 8; ++i) EXPECT_FALSE(m.WantsPlainPass(1)) << i;
  EXPECT_TRUE(m.WantsPlainPass(1));  // then every eighth step
  EXPECT_TRUE(m.WantsPlainPass(2));  // two sequences: not timed yet
  m.RecordPass(1, 0, 0.025);
  EXPECT_DOUBLE_EQ(m.plain_seconds(1), 0.0115);  // a tenth of the way up
  EXPECT_FALSE(m.WantsPlainPass(1));
  // Batches past kMaxSeqs are neither asked for nor timed.
  EXPECT_FALSE(m.WantsPlainPass(SpecCostMeter::kMaxSeqs + 1));
  m.RecordPass(SpecCostMeter::kMaxSeqs + 1, 0, 0.05);
  EXPECT_EQ(m.plain_seconds(SpecCostMeter::kMaxSeqs + 1), 0);
  EXPECT_FALSE(m.WantsPlainPass(0));
}

TEST(SpecCostMeterTest, RowCostIsEachRowsExtraTimeAgainstASequencesShare) {
  SpecCostMeter m(Config());
  // Before a plain pass is timed there is nothing to measure against.
  m.RecordPass(1, 4, 0.014);
  EXPECT_FALSE(m.row_measured());
  EXPECT_DOUBLE_EQ(m.row_cost(), 0.25);

  m.RecordPass(1, 0, 0.010);
  m.RecordPass(1, 4, 0.014);  // 4 ms more for 4 rows: 0.1 of a pass each
  EXPECT_TRUE(m.row_measured());
  EXPECT_NEAR(m.row_cost(), 0.1, 1e-12);
  m.RecordPass(1, 4, 0.018);  // 0.2: a tenth of the way up
  EXPECT_NEAR(m.row_cost(), 0.11, 1e-12);
  m.RecordPass(1, 4, 0.012);  // 0.05: halfway down
  EXPECT_NEAR(m.row_cost(), 0.08, 1e-12);
  m.RecordPass(1, 1, 0.200);  // a pass that waited: at most 4 plain passes
  EXPECT_NEAR(m.row_cost(), 0.08 + 0.1 * (4 - 0.08), 1e-12);

  // Two sequences: each one's share of a 12 ms plain pass is 6 ms, and 2
  // rows that add 1.2 ms cost 0.1 of it each.
  SpecCostMeter two(Config());
  two.RecordPass(2, 0, 0.012);
  two.RecordPass(2, 2, 0.0132);
  EXPECT_NEAR(two.row_cost(), 0.1, 1e-12);
  // A pass quicker than the plain one (noise) costs nothing, not less.
  SpecCostMeter noisy(Config());
  noisy.RecordPass(1, 0, 0.010);
  noisy.RecordPass(1, 2, 0.009);
  EXPECT_EQ(noisy.row_cost(), 0);
}

TEST(SpecCostMeterTest, DraftCostIsEachTokensDraftingAgainstASequencesShare) {
  SpecCostMeter m(Config());
  m.RecordDrafting(1, 3, 0.0165);
  EXPECT_FALSE(m.draft_measured());  // no plain pass to compare with
  EXPECT_EQ(m.draft_cost(), 0);
  m.RecordPass(1, 0, 0.010);
  m.RecordDrafting(1, 3, 0.0165);  // 5.5 ms a token
  EXPECT_TRUE(m.draft_measured());
  EXPECT_NEAR(m.draft_cost(), 0.55, 1e-12);
  m.RecordDrafting(1, 1, 0.0045);
  EXPECT_NEAR(m.draft_cost(), 0.5, 1e-12);
  m.RecordDrafting(1, 0, 0.002);  // nothing drafted: no sample
  EXPECT_NEAR(m.draft_cost(), 0.5, 1e-12);
  m.RecordDrafting(2, 2, 0.005);  // no plain pass over two sequences yet
  EXPECT_NEAR(m.draft_cost(), 0.5, 1e-12);
  // Two sequences, a 12 ms plain pass: 4 tokens in 12 ms are 3 ms each,
  // half of a sequence's 6 ms share.
  SpecCostMeter two(Config());
  two.RecordPass(2, 0, 0.012);
  two.RecordDrafting(2, 4, 0.012);
  EXPECT_NEAR(two.draft_cost(), 0.5, 1e-12);
}

}  // namespace spec_cost_meter_tests
}  // namespace kiln
