// The forward session's block bookkeeping.
#include "capi/kv_block_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln::capi {
namespace kv_block_pool_tests {

TEST(KvBlockPool, GrowsByWholeBlocksAndTruncateFreesThem) {
  KvBlockPool pool(/*num_blocks=*/6, /*block_size=*/4, /*num_seqs=*/2);
  EXPECT_EQ(pool.num_free_blocks(), 6);
  ASSERT_TRUE(pool.Grow(0, 5));
  EXPECT_EQ(pool.length(0), 5);
  EXPECT_EQ(pool.block_table(0).size(), 2u);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  ASSERT_TRUE(pool.Grow(0, 8));  // still two blocks
  EXPECT_EQ(pool.num_free_blocks(), 4);
  ASSERT_TRUE(pool.Grow(1, 16));
  EXPECT_EQ(pool.num_free_blocks(), 0);
  std::set<int32_t> all(pool.block_table(0).begin(), pool.block_table(0).end());
  all.insert(pool.block_table(1).begin(), pool.block_table(1).end());
  EXPECT_EQ(all.size(), 6u) << "no block is handed out twice";

  EXPECT_FALSE(pool.Grow(0, 9));  // needs a third block: none free
  EXPECT_EQ(pool.length(0), 8);
  EXPECT_EQ(pool.block_table(0).size(), 2u);

  pool.Truncate(1, 5);  // keeps ceil(5 / 4) = 2 blocks
  EXPECT_EQ(pool.length(1), 5);
  EXPECT_EQ(pool.block_table(1).size(), 2u);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  pool.Truncate(1, 4);
  EXPECT_EQ(pool.block_table(1).size(), 1u);
  pool.Truncate(1, 0);
  EXPECT_TRUE(pool.block_table(1).empty());
  EXPECT_EQ(pool.num_free_blocks(), 4);
  ASSERT_TRUE(pool.Grow(0, 9));
  EXPECT_EQ(pool.BlocksFor(0), 0);
  EXPECT_EQ(pool.BlocksFor(1), 1);
  EXPECT_EQ(pool.BlocksFor(8), 2);
}

}  // namespace kv_block_pool_tests
}  // namespace kiln::capi
