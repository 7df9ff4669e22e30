// Chunk-chain hashing and the bounded map from prompt prefixes to replicas.
#include "router/prefix_affinity.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::router {
namespace prefix_affinity_tests {

bool Any(int) {
  return true;
}

TEST(PrefixChainHashes, OneHashPerCompleteChunk) {
  EXPECT_TRUE(PrefixChainHashes("abc", 4).empty());
  EXPECT_EQ(PrefixChainHashes("abcd", 4).size(), 1u);
  EXPECT_EQ(PrefixChainHashes("abcdefghi", 4).size(), 2u);  // the partial last chunk is left out
  EXPECT_TRUE(PrefixChainHashes("", 4).empty());
}

TEST(PrefixChainHashes, SharedPrefixesShareLeadingHashes) {
  const auto a = PrefixChainHashes("the same start, then one ending", 8);
  const auto b = PrefixChainHashes("the same start, and another one", 8);
  ASSERT_GE(a.size(), 3u);
  ASSERT_GE(b.size(), 3u);
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
  EXPECT_NE(a[2], b[2]);
}

TEST(PrefixChainHashes, EachHashDependsOnWhatComesBefore) {
  // The same second chunk after different first chunks hashes differently.
  const auto a = PrefixChainHashes("AAAAzzzz", 4);
  const auto b = PrefixChainHashes("BBBBzzzz", 4);
  EXPECT_NE(a[1], b[1]);
}

TEST(PrefixAffinityMap, FindsTheLongestKnownPrefix) {
  PrefixAffinityMap map(100);
  const auto short_prompt = PrefixChainHashes("0123456789abcdef", 4);         // 4 chunks
  const auto long_prompt = PrefixChainHashes("0123456789abcdefGHIJKLMN", 4);  // same 4, then 2 more
  map.Record(short_prompt, 0);
  PrefixAffinityMap::Match m = map.Longest(long_prompt, Any);
  EXPECT_EQ(m.replica, 0);
  EXPECT_EQ(m.chunks, 4u);
  map.Record(long_prompt, 1);
  m = map.Longest(long_prompt, Any);
  EXPECT_EQ(m.replica, 1);
  EXPECT_EQ(m.chunks, 6u);
  EXPECT_EQ(map.Longest(PrefixChainHashes("unrelated text!!", 4), Any).replica, -1);
}

TEST(PrefixAffinityMap, SkipsReplicasThatCannotTakeTheRequest) {
  PrefixAffinityMap map(100);
  const auto p = PrefixChainHashes("aaaabbbbcccc", 4);
  map.Record({p[0]}, 0);
  map.Record({p[1], p[2]}, 1);
  // Replica 1 holds the longest prefix but is down: replica 0's shorter one.
  EXPECT_EQ(map.Longest(p, Any).replica, 1);
  PrefixAffinityMap::Match m = map.Longest(p, [](int r) { return r != 1; });
  EXPECT_EQ(m.replica, 0);
  EXPECT_EQ(m.chunks, 1u);
}

TEST(PrefixAffinityMap, ForgetsTheLeastRecentlyUsedBeyondItsCapacity) {
  PrefixAffinityMap map(3);
  const auto a = PrefixChainHashes("aaaa", 4);
  const auto b = PrefixChainHashes("bbbb", 4);
  const auto c = PrefixChainHashes("cccc", 4);
  const auto d = PrefixChainHashes("dddd", 4);
  map.Record(a, 0);
  map.Record(b, 1);
  map.Record(c, 0);
  map.Record(a, 0);  // a is now the most recent; b the least
  map.Record(d, 1);
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.Longest(b, Any).replica, -1);
  EXPECT_EQ(map.Longest(a, Any).replica, 0);
  EXPECT_EQ(map.Longest(c, Any).replica, 0);
  EXPECT_EQ(map.Longest(d, Any).replica, 1);
}

TEST(PrefixAffinityMap, ForgetsAReplicaThatWentAway) {
  PrefixAffinityMap map(10);
  const auto a = PrefixChainHashes("aaaabbbb", 4);
  const auto c = PrefixChainHashes("cccc", 4);
  map.Record(a, 0);
  map.Record(c, 1);
  map.Forget(0);
  EXPECT_EQ(map.size(), 1u);
  EXPECT_EQ(map.Longest(a, Any).replica, -1);
  EXPECT_EQ(map.Longest(c, Any).replica, 1);
}

}  // namespace prefix_affinity_tests
}  // namespace kiln::router
