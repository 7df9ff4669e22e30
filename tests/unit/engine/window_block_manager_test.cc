// BlockManager's window pool: entries released exactly when no future query
// can see them, reference counts of shared blocks, prefix hits shortened to
// what the window pool still caches, and the invariant check's view of it.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/block_manager.h"
#include "engine/model_session_options.h"

namespace kiln {
namespace window_block_manager_tests {

constexpr int32_t kBlock = 4;
constexpr int32_t kWindow = 8;  // a query at p sees (p - 8, p]

Sequence MakeSeq(RequestId id, int32_t num_tokens, int32_t first_token = 0) {
  std::vector<int32_t> tokens(static_cast<size_t>(num_tokens));
  std::iota(tokens.begin(), tokens.end(), first_token);
  return Sequence(id, std::move(tokens), {});
}

// Advances seq to `computed` tokens as a pass would: the slots first, then
// the cache offer and the release.
void ComputeTo(BlockManager& full, BlockManager& window, Sequence& seq, int32_t computed) {
  const int32_t n = computed - seq.num_computed_tokens;
  ASSERT_TRUE(full.AllocateSlots(seq, n));
  ASSERT_TRUE(window.AllocateSlots(seq, n));
  seq.num_computed_tokens = computed;
  full.CacheComputedBlocks(seq);
  window.CacheComputedBlocks(seq);
  window.ReleaseOutsideWindow(seq);
}

TEST(WindowBlockManagerTest, ReleasesABlockExactlyWhenTheNextQueryNoLongerSeesIt) {
  BlockManager full(16, kBlock, true);
  BlockManager window(16, kBlock, true, kWindow);
  Sequence seq = MakeSeq(0, 24);
  const Sequence* holders[] = {&seq};
  // 10 computed: the next query, at 10, sees 3..10, which block 0 holds.
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, seq, 10));
  EXPECT_EQ(seq.window_block_table.size(), 3u);
  EXPECT_NE(seq.window_block_table[0], -1);
  EXPECT_EQ(window.FirstWindowEntry(seq), 0);
  EXPECT_EQ(window.num_used_blocks(), 3);
  // 11: the next query sees 4..11, so block 0 (positions 0..3) goes.
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, seq, 11));
  EXPECT_EQ(seq.window_block_table[0], -1);
  EXPECT_NE(seq.window_block_table[1], -1);
  EXPECT_EQ(window.FirstWindowEntry(seq), 1);
  EXPECT_EQ(window.num_used_blocks(), 2);
  // 14: sees 7..14, block 1 (4..7) stays; 15: sees 8..15, it goes.
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, seq, 14));
  EXPECT_NE(seq.window_block_table[1], -1);
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, seq, 15));
  EXPECT_EQ(seq.window_block_table[1], -1);
  EXPECT_EQ(BlockManager::HeldBlocks(seq.window_block_table), 2);
  // The full pool keeps everything.
  EXPECT_EQ(BlockManager::HeldBlocks(seq.block_table), 4);
  EXPECT_EQ(full.num_used_blocks(), 4);
  EXPECT_TRUE(full.CheckInvariants(holders).ok());
  Status s = window.CheckInvariants(holders);
  EXPECT_TRUE(s.ok()) << s.ToString();

  full.Free(seq);
  window.Free(seq);
  EXPECT_TRUE(seq.window_block_table.empty());
  EXPECT_EQ(window.num_free_blocks(), 16);
  EXPECT_TRUE(window.CheckInvariants({}).ok());
}

TEST(WindowBlockManagerTest, ABlockSharedByTwoSequencesStaysWhileOneStillSeesIt) {
  BlockManager full(32, kBlock, true);
  BlockManager window(32, kBlock, true, kWindow);
  Sequence a = MakeSeq(0, 40);
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, a, 8));
  // b shares a's first two blocks: its hit's first query (at 8) sees 1..8.
  Sequence b = MakeSeq(1, 40);
  CachedPrefix prefix = full.FindCachedPrefix(b);
  ASSERT_EQ(prefix.num_tokens, 8);
  CachedPrefix window_prefix = window.FindWindowPrefix(b, prefix);
  ASSERT_EQ(prefix.num_tokens, 8);
  ASSERT_EQ(window_prefix.num_tokens, 8);
  EXPECT_EQ(window_prefix.blocks, (std::vector<int32_t>{a.window_block_table[0], a.window_block_table[1]}));
  ASSERT_TRUE(full.AllocateSlots(b, 4, prefix));
  ASSERT_TRUE(window.AllocateSlots(b, 4, window_prefix));
  b.num_computed_tokens = 12;
  window.ReleaseOutsideWindow(b);
  // b no longer needs block 0; a (next query at 8) does.
  EXPECT_EQ(b.window_block_table[0], -1);
  EXPECT_NE(a.window_block_table[0], -1);
  const Sequence* holders[] = {&a, &b};
  Status s = window.CheckInvariants(holders);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(window.num_used_blocks(), 3);  // a's two, b's third (block 1 shared)
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, a, 12));
  EXPECT_EQ(a.window_block_table[0], -1);
  EXPECT_EQ(window.num_used_blocks(), 3);  // block 0 is free, a's third is new
  s = window.CheckInvariants(holders);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(WindowBlockManagerTest, PrefixHitIsShortenedToWhatTheWindowPoolStillCaches) {
  BlockManager full(32, kBlock, true);
  BlockManager window(8, kBlock, true, kWindow);
  Sequence a = MakeSeq(0, 17);
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, a, 17));
  full.Free(a);
  window.Free(a);
  // Released blocks stay findable: the whole prefix hits in both pools
  // (16 tokens: the first query, at 16, sees 9..16 in blocks 2 and 3).
  Sequence b = MakeSeq(1, 17);
  CachedPrefix prefix = full.FindCachedPrefix(b);
  ASSERT_EQ(prefix.num_tokens, 16);
  CachedPrefix window_prefix = window.FindWindowPrefix(b, prefix);
  EXPECT_EQ(prefix.num_tokens, 16);
  ASSERT_EQ(window_prefix.blocks.size(), 4u);
  EXPECT_EQ(window_prefix.blocks[0], -1);
  EXPECT_EQ(window_prefix.blocks[1], -1);
  EXPECT_NE(window_prefix.blocks[3], -1);

  // Another sequence takes every free window block but one: cached ones
  // are evicted, least recently freed first (all of a's but its block 2).
  Sequence other = MakeSeq(2, 28, 1000);
  ASSERT_TRUE(window.AllocateSlots(other, 28));
  EXPECT_EQ(window.num_free_blocks(), 1);
  CachedPrefix shorter = full.FindCachedPrefix(b);
  ASSERT_EQ(shorter.num_tokens, 16);
  window_prefix = window.FindWindowPrefix(b, shorter);
  // Block 2 alone serves no hit's first query (a hit of 16 needs block 3
  // too, one of 12 block 1): the hit is dropped in both pools.
  EXPECT_EQ(shorter.num_tokens, 0);
  EXPECT_TRUE(shorter.blocks.empty());
  EXPECT_EQ(window_prefix.num_tokens, 0);
  EXPECT_TRUE(window_prefix.blocks.empty());
  ASSERT_TRUE(full.AllocateSlots(b, 17, shorter));
  EXPECT_FALSE(window.CanAllocate(b, 17, window_prefix));
}

TEST(WindowBlockManagerTest, InvariantCheckCatchesABlockHeldBeyondTheWindow) {
  BlockManager full(16, kBlock, false);
  BlockManager window(16, kBlock, false, kWindow);
  Sequence seq = MakeSeq(0, 24);
  ASSERT_NO_FATAL_FAILURE(ComputeTo(full, window, seq, 11));
  const Sequence* holders[] = {&seq};
  ASSERT_TRUE(window.CheckInvariants(holders).ok());
  // Not released although no query can see it.
  seq.num_computed_tokens = 15;
  EXPECT_FALSE(window.CheckInvariants(holders).ok());
  seq.num_computed_tokens = 11;
  // Released although the next query sees it.
  const int32_t id = seq.window_block_table[1];
  seq.window_block_table[1] = -1;
  EXPECT_FALSE(window.CheckInvariants(holders).ok());
  seq.window_block_table[1] = id;
  EXPECT_TRUE(window.CheckInvariants(holders).ok());
}

TEST(WindowBlockManagerTest, PoolSizeBoundsWhatSequencesCanHold) {
  // max_seqs + (tokens + max_seqs * (window + block - 2)) / block.
  EXPECT_EQ(KvWindowPoolBlocks(32, 16, 4, 64, 4096), 4 + (64 + 4 * 46) / 16);
  EXPECT_EQ(KvWindowPoolBlocks(512, 16, 64, 512, 32768), 64 + (512 + 64 * 526) / 16);
  // Never beyond every sequence at full length.
  EXPECT_EQ(KvWindowPoolBlocks(512, 16, 2, 512, 64), 2 * 4);
}

}  // namespace window_block_manager_tests
}  // namespace kiln
