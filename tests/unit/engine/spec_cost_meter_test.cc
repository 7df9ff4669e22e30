// The cost meter: plain passes timed per batch size in runs of plain_run
// steps (asked for when a batch size has none yet, soon again, then every
// plain_every steps), each timed only after another plain pass over as
// many sequences; the row cost from passes with drafts against them, the
// draft cost from the time spent drafting each token; each figure the
// median of its recent per-sequence shares; nothing is measured against a
// plain pass not yet timed.
#include "engine/spec_cost_meter.h"

#include <gtest/gtest.h>

namespace kiln {
namespace spec_cost_meter_tests {

SpecCostConfig Config() {
  SpecCostConfig c;
  c.plain_window = 3;
  c.cost_window = 3;
  c.plain_run = 3;
  c.second_plain_after = 4;
  c.plain_every = 8;
  c.initial_row_cost = 0.25;
  c.initial_draft_cost = 0;
  return c;
}

// Two plain passes over `seqs` sequences, the first of which (after
// drafting or a prefill) gives no sample.
void TimePlain(SpecCostMeter& m, int32_t seqs, double seconds) {
  m.RecordOtherPass();
  m.RecordPass(seqs, 0, 3 * seconds);  // cold: not a sample
  m.RecordPass(seqs, 0, seconds);
}

TEST(RecentMedianTest, IsTheMiddleOfTheLastSamples) {
  RecentMedian m(3);
  EXPECT_EQ(m.samples(), 0);
  m.Add(5);
  EXPECT_EQ(m.value(), 5);
  m.Add(1);
  EXPECT_EQ(m.value(), 1);  // the lower of two
  m.Add(3);
  EXPECT_EQ(m.value(), 3);
  m.Add(100);  // 1, 3, 100
  EXPECT_EQ(m.value(), 3);
  m.Add(100);  // 3, 100, 100
  EXPECT_EQ(m.value(), 100);
  EXPECT_EQ(m.samples(), 5);
}

TEST(SpecCostMeterTest, PlainPassesAreAskedForInRunsPerBatchSizeAndNowAndThen) {
  SpecCostMeter m(Config());
  // Nothing timed yet: a run of three plain steps.
  EXPECT_TRUE(m.WantsPlainPass(1));
  m.RecordPass(1, 0, 0.020);  // after the prefill: not a sample
  EXPECT_EQ(m.plain_seconds(1), 0);
  EXPECT_TRUE(m.WantsPlainPass(1));
  m.RecordPass(1, 0, 0.010);
  EXPECT_DOUBLE_EQ(m.plain_seconds(1), 0.010);
  EXPECT_TRUE(m.WantsPlainPass(1));
  m.RecordPass(1, 0, 0.012);
  EXPECT_DOUBLE_EQ(m.plain_seconds(1), 0.010);  // the lower of two
  // The second run soon after.
  for (int i = 1; i < 4; ++i) EXPECT_FALSE(m.WantsPlainPass(1)) << i;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(m.WantsPlainPass(1)) << i;
  m.RecordPass(1, 2, 0.015);  // drafts ran instead: the next plain pass is cold
  m.RecordPass(1, 0, 0.030);
  EXPECT_DOUBLE_EQ(m.plain_seconds(1), 0.010);
  m.RecordPass(1, 0, 0.011);  // 0.010, 0.012, 0.011
  EXPECT_DOUBLE_EQ(m.plain_seconds(1), 0.011);
  // Then every eighth step.
  for (int i = 1; i < 8; ++i) EXPECT_FALSE(m.WantsPlainPass(1)) << i;
  EXPECT_TRUE(m.WantsPlainPass(1));
  // Two sequences: not timed yet.
  EXPECT_TRUE(m.WantsPlainPass(2));
  // A plain pass over other sequences than the one before gives no sample.
  m.RecordPass(2, 0, 0.05);
  EXPECT_EQ(m.plain_seconds(2), 0);
  m.RecordPass(2, 0, 0.02);
  EXPECT_DOUBLE_EQ(m.plain_seconds(2), 0.02);
  // Batches past kMaxSeqs are neither asked for nor timed.
  EXPECT_FALSE(m.WantsPlainPass(SpecCostMeter::kMaxSeqs + 1));
  m.RecordPass(SpecCostMeter::kMaxSeqs + 1, 0, 0.05);
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

  TimePlain(m, 1, 0.010);
  m.RecordPass(1, 4, 0.014);  // 4 ms more for 4 rows: 0.1 of a pass each
  EXPECT_TRUE(m.row_measured());
  EXPECT_NEAR(m.row_cost(), 0.1, 1e-12);
  m.RecordPass(1, 4, 0.018);  // 0.1, 0.2: the lower
  EXPECT_NEAR(m.row_cost(), 0.1, 1e-12);
  m.RecordPass(1, 4, 0.022);  // 0.1, 0.2, 0.3
  EXPECT_NEAR(m.row_cost(), 0.2, 1e-12);
  m.RecordPass(1, 1, 0.200);  // a pass that waited: at most 4 plain passes, and outvoted
  EXPECT_NEAR(m.row_cost(), 0.3, 1e-12);

  // Two sequences: each one's share of a 12 ms plain pass is 6 ms, and 2
  // rows that add 1.2 ms cost 0.1 of it each.
  SpecCostMeter two(Config());
  TimePlain(two, 2, 0.012);
  two.RecordPass(2, 2, 0.0132);
  EXPECT_NEAR(two.row_cost(), 0.1, 1e-12);
  // A pass quicker than the plain one (noise) costs nothing, not less.
  SpecCostMeter noisy(Config());
  TimePlain(noisy, 1, 0.010);
  noisy.RecordPass(1, 2, 0.009);
  EXPECT_EQ(noisy.row_cost(), 0);
}

TEST(SpecCostMeterTest, DraftCostIsEachTokensDraftingAgainstASequencesShare) {
  SpecCostMeter m(Config());
  m.RecordDrafting(1, 3, 0.0165);
  EXPECT_FALSE(m.draft_measured());  // no plain pass to compare with
  EXPECT_EQ(m.draft_cost(), 0);
  TimePlain(m, 1, 0.010);
  m.RecordDrafting(1, 3, 0.0165);  // 5.5 ms a token
  EXPECT_TRUE(m.draft_measured());
  EXPECT_NEAR(m.draft_cost(), 0.55, 1e-12);
  m.RecordDrafting(1, 1, 0.0045);
  EXPECT_NEAR(m.draft_cost(), 0.45, 1e-12);
  m.RecordDrafting(1, 0, 0.002);  // nothing drafted: no sample
  EXPECT_NEAR(m.draft_cost(), 0.45, 1e-12);
  m.RecordDrafting(2, 2, 0.005);  // no plain pass over two sequences yet
  EXPECT_NEAR(m.draft_cost(), 0.45, 1e-12);
  m.RecordDrafting(1, 2, 0.01);  // 0.55, 0.45, 0.5
  EXPECT_NEAR(m.draft_cost(), 0.5, 1e-12);
  // Two sequences, a 12 ms plain pass: 4 tokens in 12 ms are 3 ms each,
  // half of a sequence's 6 ms share.
  SpecCostMeter two(Config());
  TimePlain(two, 2, 0.012);
  two.RecordDrafting(2, 4, 0.012);
  EXPECT_NEAR(two.draft_cost(), 0.5, 1e-12);
}

}  // namespace spec_cost_meter_tests
}  // namespace kiln
