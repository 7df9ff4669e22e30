// BlockManager: allocation without side effects on failure, reference
// counts, the hash-chained prefix cache and LRU eviction of cached blocks.
#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace kiln {
namespace block_manager_tests {

constexpr int32_t kBlock = 4;

std::vector<int32_t> Range(int32_t begin, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

Sequence MakeSeq(RequestId id, std::vector<int32_t> tokens) {
  return Sequence(id, std::move(tokens), {});
}

// Admits `seq` (with whatever prefix the cache has) and computes all of
// its tokens, as a pass would.
void AdmitAndCompute(BlockManager& bm, Sequence& seq) {
  CachedPrefix prefix = bm.FindCachedPrefix(seq);
  ASSERT_TRUE(bm.AllocateSlots(seq, seq.num_tokens() - prefix.num_tokens, prefix));
  seq.num_computed_tokens = seq.num_tokens();
  bm.CacheComputedBlocks(seq);
}

TEST(BlockManagerTest, AllocatesBlocksToCoverTokensAndFreesThem) {
  BlockManager bm(8, kBlock, /*enable_prefix_caching=*/false);
  Sequence seq = MakeSeq(0, Range(0, 10));
  ASSERT_TRUE(bm.AllocateSlots(seq, 10));
  EXPECT_EQ(seq.block_table.size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 5);
  const Sequence* holders[] = {&seq};
  EXPECT_TRUE(bm.CheckInvariants(holders).ok());

  // Growing within the last block takes nothing; crossing into a new one does.
  seq.num_computed_tokens = 10;
  seq.tokens.push_back(10);
  ASSERT_TRUE(bm.AllocateSlots(seq, 1));
  EXPECT_EQ(seq.block_table.size(), 3u);
  seq.num_computed_tokens = 11;
  seq.tokens.push_back(11);
  ASSERT_TRUE(bm.AllocateSlots(seq, 1));
  EXPECT_EQ(seq.block_table.size(), 3u);
  seq.num_computed_tokens = 12;
  seq.tokens.push_back(12);
  ASSERT_TRUE(bm.AllocateSlots(seq, 1));
  EXPECT_EQ(seq.block_table.size(), 4u);
  EXPECT_TRUE(bm.CheckInvariants(holders).ok());

  bm.Free(seq);
  EXPECT_TRUE(seq.block_table.empty());
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_TRUE(bm.CheckInvariants({}).ok());
}

TEST(BlockManagerTest, FailedAllocationChangesNothing) {
  BlockManager bm(3, kBlock, true);
  Sequence a = MakeSeq(0, Range(0, 8));
  ASSERT_TRUE(bm.AllocateSlots(a, 8));
  Sequence b = MakeSeq(1, Range(100, 8));
  EXPECT_FALSE(bm.AllocateSlots(b, 8));
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_EQ(bm.num_free_blocks(), 1);
  const Sequence* holders[] = {&a};
  EXPECT_TRUE(bm.CheckInvariants(holders).ok());
  EXPECT_TRUE(bm.AllocateSlots(b, 4));
  EXPECT_EQ(bm.num_free_blocks(), 0);
}

TEST(BlockManagerTest, SharesCachedPrefixBlocksByReference) {
  BlockManager bm(16, kBlock, true);
  Sequence a = MakeSeq(0, Range(0, 14));  // 3 full blocks and 2 tokens
  AdmitAndCompute(bm, a);

  std::vector<int32_t> b_tokens = Range(0, 12);
  b_tokens.push_back(500);
  b_tokens.push_back(501);
  b_tokens.push_back(502);
  Sequence b = MakeSeq(1, b_tokens);
  CachedPrefix prefix = bm.FindCachedPrefix(b);
  ASSERT_EQ(prefix.blocks.size(), 3u);
  EXPECT_EQ(prefix.num_tokens, 12);
  EXPECT_EQ(prefix.blocks, std::vector<int32_t>(a.block_table.begin(), a.block_table.begin() + 3));
  int32_t free_before = bm.num_free_blocks();
  ASSERT_TRUE(bm.AllocateSlots(b, b.num_tokens() - prefix.num_tokens, prefix));
  EXPECT_EQ(b.num_computed_tokens, 12);
  EXPECT_EQ(bm.num_free_blocks(), free_before - 1);  // only the new tail block
  EXPECT_EQ(bm.prefix_stats().hits, 12);
  const Sequence* holders[] = {&a, &b};
  EXPECT_TRUE(bm.CheckInvariants(holders).ok());

  // Freeing one holder keeps the shared blocks for the other.
  bm.Free(a);
  const Sequence* b_only[] = {&b};
  EXPECT_TRUE(bm.CheckInvariants(b_only).ok());
  bm.Free(b);
  EXPECT_EQ(bm.num_free_blocks(), 16);
  EXPECT_TRUE(bm.CheckInvariants({}).ok());
}

TEST(BlockManagerTest, DifferentEarlierBlockMeansNoHitLater) {
  BlockManager bm(16, kBlock, true);
  Sequence a = MakeSeq(0, Range(0, 12));
  AdmitAndCompute(bm, a);
  bm.Free(a);
  // Same second and third blocks, different first block: the chain differs.
  std::vector<int32_t> tokens = Range(0, 13);
  tokens[0] = 999;
  Sequence b = MakeSeq(1, tokens);
  EXPECT_TRUE(bm.FindCachedPrefix(b).blocks.empty());
}

TEST(BlockManagerTest, FullyCachedPromptRecomputesItsLastBlock) {
  BlockManager bm(16, kBlock, true);
  Sequence a = MakeSeq(0, Range(0, 8));
  AdmitAndCompute(bm, a);
  Sequence b = MakeSeq(1, Range(0, 8));
  CachedPrefix prefix = bm.FindCachedPrefix(b);
  EXPECT_EQ(prefix.num_tokens, 4);  // one whole block backed off
  ASSERT_TRUE(bm.AllocateSlots(b, 4, prefix));
  EXPECT_EQ(b.block_table.size(), 2u);
  EXPECT_NE(b.block_table[1], a.block_table[1]);  // the recomputed block is b's own
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
}

TEST(BlockManagerTest, FreedCachedBlocksStayFindableUntilEvicted) {
  BlockManager bm(4, kBlock, true);
  Sequence a = MakeSeq(0, Range(0, 9));  // blocks: [0-3] [4-7] [8]
  AdmitAndCompute(bm, a);
  std::vector<int32_t> a_blocks = a.block_table;
  bm.Free(a);
  EXPECT_EQ(bm.num_free_blocks(), 4);

  // A hit revives the free blocks.
  Sequence b = MakeSeq(1, Range(0, 9));
  CachedPrefix prefix = bm.FindCachedPrefix(b);
  EXPECT_EQ(prefix.num_tokens, 8);
  ASSERT_TRUE(bm.AllocateSlots(b, 1, prefix));
  EXPECT_EQ(bm.num_free_blocks(), 1);
  const Sequence* holders[] = {&b};
  EXPECT_TRUE(bm.CheckInvariants(holders).ok());
  bm.Free(b);

  // Unrelated sequences use the hashless and never used blocks first, then
  // evict the cached tail before the cached head.
  Sequence c = MakeSeq(2, Range(100, 8));
  ASSERT_TRUE(bm.AllocateSlots(c, 8));
  EXPECT_EQ(c.block_table[0], a_blocks[2]);
  Sequence d = MakeSeq(3, Range(200, 4));
  ASSERT_TRUE(bm.AllocateSlots(d, 4));
  EXPECT_EQ(d.block_table[0], a_blocks[1]);
  Sequence e = MakeSeq(4, Range(0, 9));
  EXPECT_EQ(bm.FindCachedPrefix(e).num_tokens, 4);  // the head survived
  const Sequence* cd[] = {&c, &d};
  EXPECT_TRUE(bm.CheckInvariants(cd).ok());
}

TEST(BlockManagerTest, PrefixCachingOffFindsNothing) {
  BlockManager bm(8, kBlock, false);
  Sequence a = MakeSeq(0, Range(0, 12));
  AdmitAndCompute(bm, a);
  bm.Free(a);
  Sequence b = MakeSeq(1, Range(0, 12));
  EXPECT_TRUE(bm.FindCachedPrefix(b).blocks.empty());
  EXPECT_EQ(bm.prefix_stats().queries, 0);
  EXPECT_TRUE(bm.CheckInvariants({}).ok());
}

TEST(BlockManagerTest, SamePrefixComputedTwiceAtOnceKeepsOneCacheEntry) {
  BlockManager bm(16, kBlock, true);
  Sequence a = MakeSeq(0, Range(0, 9));
  Sequence b = MakeSeq(1, Range(0, 9));
  // Both admitted before either computed anything: no hits, own blocks.
  ASSERT_TRUE(bm.AllocateSlots(a, 9, bm.FindCachedPrefix(a)));
  ASSERT_TRUE(bm.AllocateSlots(b, 9, bm.FindCachedPrefix(b)));
  a.num_computed_tokens = b.num_computed_tokens = 9;
  bm.CacheComputedBlocks(a);
  bm.CacheComputedBlocks(b);
  const Sequence* holders[] = {&a, &b};
  EXPECT_TRUE(bm.CheckInvariants(holders).ok());
  Sequence c = MakeSeq(2, Range(0, 9));
  CachedPrefix prefix = bm.FindCachedPrefix(c);
  EXPECT_EQ(prefix.blocks, std::vector<int32_t>(a.block_table.begin(), a.block_table.begin() + 2));
}

TEST(BlockManagerTest, InvariantCheckCatchesAMissingHolder) {
  BlockManager bm(8, kBlock, true);
  Sequence a = MakeSeq(0, Range(0, 5));
  ASSERT_TRUE(bm.AllocateSlots(a, 5));
  Status s = bm.CheckInvariants({});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("reference count"), std::string::npos) << s.message();
  // A block listed twice is caught too.
  a.block_table.push_back(a.block_table[0]);
  const Sequence* holders[] = {&a};
  EXPECT_FALSE(bm.CheckInvariants(holders).ok());
}

TEST(BlockManagerTest, TruncatingSlotsFreesTheBlocksPastTheKeptTokens) {
  BlockManager bm(8, kBlock, /*enable_prefix_caching=*/true);
  Sequence seq = MakeSeq(0, Range(0, 6));
  AdmitAndCompute(bm, seq);  // one full block cached, two tokens in the second
  // Slots for the next token and a draft of five: positions 6 to 11.
  ASSERT_TRUE(bm.AllocateSlots(seq, 6));
  ASSERT_EQ(seq.block_table.size(), 3u);
  const std::vector<int32_t> kept(seq.block_table.begin(), seq.block_table.begin() + 2);
  // No draft token accepted: 7 tokens computed, so the third block goes.
  bm.TruncateSlots(seq, 7);
  EXPECT_EQ(seq.block_table, kept);
  EXPECT_EQ(bm.num_free_blocks(), 6);
  const Sequence* holders[] = {&seq};
  Status s = bm.CheckInvariants(holders);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // Nothing past the kept tokens' blocks is dropped, whatever the count.
  bm.TruncateSlots(seq, 8);
  EXPECT_EQ(seq.block_table, kept);
  bm.TruncateSlots(seq, 5);
  EXPECT_EQ(seq.block_table, kept);
}

}  // namespace block_manager_tests
}  // namespace kiln
