// Concat and Split on nchw16c activations against the row-major kernels:
// along the channels (parts of whole blocks, and parts that split a block)
// and along the other axes.
#include <gtest/gtest.h>

#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln {
namespace blocked_layout_concat_tests {

using blocked_test::BlockedCase;
using conv_test::RandomTensor;

BlockedCase ConcatCase(int64_t axis, const std::vector<std::vector<int64_t>>& parts) {
  BlockedCase bc;
  bc.op = "Concat";
  bc.attrs.SetInt("axis", axis);
  uint32_t seed = 1;
  for (const auto& dims : parts) {
    bc.inputs.push_back(RandomTensor(dims, seed++));
    bc.constant.push_back(false);
  }
  return bc;
}

BlockedCase SplitCase(int64_t axis, const std::vector<int64_t>& dims, const std::vector<int64_t>& sizes) {
  BlockedCase bc;
  bc.op = "Split";
  bc.attrs.SetInt("axis", axis);
  bc.inputs = {RandomTensor(dims, 3),
               TensorData::FromValues<int64_t>(DType::kI64, {static_cast<int64_t>(sizes.size())}, sizes)};
  bc.constant = {false, true};
  bc.num_outputs = static_cast<int>(sizes.size());
  return bc;
}

TEST(BlockedLayoutConcat, ChannelsMatchRowMajor) {
  // C2f's concat of 16-channel halves, one with a padded last part (16 + 24 = 40).
  blocked_test::ExpectBlockedMatchesRowMajor(ConcatCase(1, {{1, 16, 5, 4}, {1, 16, 5, 4}, {1, 16, 5, 4}}),
                                             "16+16+16");
  blocked_test::ExpectBlockedMatchesRowMajor(ConcatCase(1, {{2, 16, 5, 4}, {2, 24, 5, 4}}), "16+24");
  blocked_test::ExpectBlockedMatchesRowMajor(ConcatCase(-3, {{1, 32, 3, 3}, {1, 40, 3, 3}}),
                                             "32+40, axis -3");
}

TEST(BlockedLayoutConcat, OtherAxesMatchRowMajor) {
  blocked_test::ExpectBlockedMatchesRowMajor(ConcatCase(0, {{1, 24, 5, 4}, {2, 24, 5, 4}}), "batch");
  blocked_test::ExpectBlockedMatchesRowMajor(ConcatCase(2, {{2, 40, 3, 4}, {2, 40, 5, 4}}), "height");
  blocked_test::ExpectBlockedMatchesRowMajor(ConcatCase(3, {{1, 24, 3, 4}, {1, 24, 3, 1}}), "width");
}

TEST(BlockedLayoutConcat, PartsThatSplitABlockMoveByLanesAndConstantsStayRowMajor) {
  BlockedCase bc = ConcatCase(1, {{1, 24, 5, 4}, {1, 16, 5, 4}});
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "24+16");
  bc = ConcatCase(1, {{1, 16, 5, 4}, {1, 16, 5, 4}});
  bc.constant = {false, true};
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "a constant part");
}

TEST(BlockedLayoutSplit, ChannelsMatchRowMajor) {
  blocked_test::ExpectBlockedMatchesRowMajor(SplitCase(1, {1, 32, 5, 4}, {16, 16}), "32 -> 16+16");
  blocked_test::ExpectBlockedMatchesRowMajor(SplitCase(1, {2, 40, 5, 4}, {16, 24}), "40 -> 16+24");
  blocked_test::ExpectBlockedMatchesRowMajor(SplitCase(1, {1, 72, 2, 3}, {32, 16, 24}), "72 -> 32+16+24");
}

TEST(BlockedLayoutSplit, OtherAxesMatchRowMajor) {
  blocked_test::ExpectBlockedMatchesRowMajor(SplitCase(2, {2, 24, 6, 4}, {2, 4}), "height");
  blocked_test::ExpectBlockedMatchesRowMajor(SplitCase(3, {1, 40, 3, 5}, {1, 4}), "width");
  blocked_test::ExpectBlockedMatchesRowMajor(SplitCase(0, {3, 24, 2, 2}, {1, 2}), "batch");
}

TEST(BlockedLayoutSplit, PartsThatSplitABlockMoveByLanes) {
  blocked_test::ExpectBlockedMatchesRowMajor(SplitCase(1, {1, 40, 5, 4}, {24, 16}), "40 -> 24+16");
}

}  // namespace blocked_layout_concat_tests
}  // namespace kiln
