// Nearest Resize on nchw16c activations against the row-major kernel: a
// YOLO-style 2x upsample and odd sizes; linear modes and resized channels
// are left row-major.
#include <gtest/gtest.h>

#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln {
namespace blocked_layout_resize_tests {

using blocked_test::BlockedCase;
using conv_test::RandomTensor;

BlockedCase ResizeCase(int64_t c, const std::vector<float>& scales, const std::vector<int64_t>& sizes) {
  BlockedCase bc;
  bc.op = "Resize";
  bc.inputs = {RandomTensor({2, c, 5, 7}, 4), conv_test::Floats({0}, {}),
               conv_test::Floats({static_cast<int64_t>(scales.size())}, scales)};
  bc.constant = {false, true, true};
  if (!sizes.empty()) {
    bc.inputs.push_back(TensorData::FromValues<int64_t>(DType::kI64, {4}, sizes));
    bc.constant.push_back(true);
  }
  return bc;
}

TEST(BlockedLayoutResize, NearestMatchesRowMajor) {
  for (int64_t c : {16, 24, 40}) {
    const std::string what = "c=" + std::to_string(c);
    blocked_test::ExpectBlockedMatchesRowMajor(ResizeCase(c, {1, 1, 2, 2}, {}), what + " 2x");
    BlockedCase odd = ResizeCase(c, {}, {2, c, 8, 11});
    odd.attrs.SetString("coordinate_transformation_mode", "asymmetric");
    odd.attrs.SetString("nearest_mode", "floor");
    blocked_test::ExpectBlockedMatchesRowMajor(odd, what + " 5x7 -> 8x11");
    blocked_test::ExpectBlockedMatchesRowMajor(ResizeCase(c, {}, {2, c, 3, 4}), what + " 5x7 -> 3x4");
  }
}

TEST(BlockedLayoutResize, LinearAndChannelResizesAreLeftRowMajor) {
  BlockedCase linear = ResizeCase(24, {1, 1, 2, 2}, {});
  linear.attrs.SetString("mode", "linear");
  linear.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(linear, "linear");
  BlockedCase channels = ResizeCase(24, {1, 2, 1, 1}, {});
  channels.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(channels, "channels");
}

}  // namespace blocked_layout_resize_tests
}  // namespace kiln
