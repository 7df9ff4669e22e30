// Causal and sliding-window key ranges against the rule tested key by key.
#include "backend/cpu/kernels/attention_mask.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln::cpu {
namespace attention_mask_tests {

TEST(CausalKeyRanges, MatchTheReferenceForEveryWindow) {
  const std::vector<int32_t> positions = {0, 1, 2, 7, 8, 30};
  const int64_t heads = 3, tokens = static_cast<int64_t>(positions.size());
  for (int64_t window : {0, -1, 1, 2, 4, 8, 31, 100}) {
    std::vector<int32_t> begin(heads * tokens, -5), end(heads * tokens, -5);
    std::vector<int32_t> want_begin(begin.size(), -5), want_end(end.size(), -5);
    CausalKeyRanges(heads, tokens, positions.data(), window, begin.data(), end.data());
    ref::CausalKeyRanges(heads, tokens, positions.data(), window, want_begin.data(), want_end.data());
    EXPECT_EQ(begin, want_begin) << "window " << window;
    EXPECT_EQ(end, want_end) << "window " << window;
  }
}

TEST(CausalKeyRanges, ReferenceSeesItselfAndAtMostTheWindow) {
  const std::vector<int32_t> positions = {0, 5, 9};
  std::vector<int32_t> begin(6), end(6);
  ref::CausalKeyRanges(2, 3, positions.data(), 0, begin.data(), end.data());
  EXPECT_EQ(begin, (std::vector<int32_t>{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(end, (std::vector<int32_t>{1, 6, 10, 1, 6, 10}));
  ref::CausalKeyRanges(2, 3, positions.data(), 4, begin.data(), end.data());
  EXPECT_EQ(begin, (std::vector<int32_t>{0, 2, 6, 0, 2, 6}));
  EXPECT_EQ(end, (std::vector<int32_t>{1, 6, 10, 1, 6, 10}));
}

}  // namespace attention_mask_tests
}  // namespace kiln::cpu
