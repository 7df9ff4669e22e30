// ReduceMean over height and width on nchw16c activations against the
// row-major kernel: keepdims 1 (a blocked [N, C, 1, 1]) and 0 (a row-major
// [N, C]), channels that fill their blocks and channels that do not.
#include <gtest/gtest.h>

#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln {
namespace blocked_layout_reduce_mean_tests {

using blocked_test::BlockedCase;
using conv_test::RandomTensor;

BlockedCase MeanCase(const std::vector<int64_t>& dims, std::vector<int64_t> axes, int64_t keepdims) {
  BlockedCase bc;
  bc.op = "ReduceMean";
  bc.attrs.SetInts("axes", std::move(axes));
  bc.attrs.SetInt("keepdims", keepdims);
  bc.inputs = {RandomTensor(dims, 9)};
  bc.constant = {false};
  return bc;
}

TEST(BlockedLayoutReduceMean, HeightAndWidthMatchRowMajor) {
  blocked_test::ExpectBlockedMatchesRowMajor(MeanCase({1, 1024, 7, 7}, {2, 3}, 0), "classifier head");
  blocked_test::ExpectBlockedMatchesRowMajor(MeanCase({2, 24, 5, 3}, {2, 3}, 0), "24 channels, 2 images");
  blocked_test::ExpectBlockedMatchesRowMajor(MeanCase({1, 40, 4, 4}, {-1, -2}, 0), "negative axes");
  blocked_test::ExpectBlockedMatchesRowMajor(MeanCase({2, 24, 9, 9}, {2, 3}, 1), "keepdims");
}

TEST(BlockedLayoutReduceMean, OtherAxesStayRowMajor) {
  for (auto axes : {std::vector<int64_t>{1}, std::vector<int64_t>{2}, std::vector<int64_t>{1, 2, 3}}) {
    BlockedCase bc = MeanCase({1, 24, 4, 4}, axes, 1);
    bc.expect_taken = false;
    blocked_test::ExpectBlockedMatchesRowMajor(bc, "axes " + std::to_string(axes.size()));
  }
}

}  // namespace blocked_layout_reduce_mean_tests
}  // namespace kiln
