// The elementwise kernels on nchw16c activations against the row-major
// ones: unary maps (the padding re-zeroed where f(0) is not 0), and the
// binary ops on same-shape, per-channel and single-value operands.
#include <gtest/gtest.h>

#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln {
namespace blocked_layout_elementwise_tests {

using blocked_test::BlockedCase;
using conv_test::RandomTensor;

TEST(BlockedLayoutElementwise, UnaryMatchesRowMajor) {
  for (int64_t c : {16, 24, 40}) {
    for (const char* op : {"Relu", "Sigmoid", "HardSwish", "HardSigmoid", "LeakyRelu", "kiln.Silu", "Tanh",
                           "Exp", "Identity", "Clip"}) {
      BlockedCase bc;
      bc.op = op;
      bc.inputs = {RandomTensor({2, c, 5, 3}, 7)};
      bc.constant = {false};
      if (std::string(op) == "Clip") {
        // Bounds that put 0 outside them, so that the padding must be re-zeroed.
        bc.inputs.push_back(conv_test::Floats({}, {0.25f}));
        bc.inputs.push_back(conv_test::Floats({}, {0.75f}));
        bc.constant = {false, true, true};
      }
      blocked_test::ExpectBlockedMatchesRowMajor(bc, std::string(op) + " c=" + std::to_string(c));
    }
  }
}

TEST(BlockedLayoutElementwise, UnaryRefusesOtherRanksAndDtypes) {
  BlockedCase bc;
  bc.op = "Relu";
  bc.inputs = {RandomTensor({2, 24, 5}, 7)};
  bc.constant = {false};
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "rank 3");
}

TEST(BlockedLayoutElementwise, BinarySameShapeMatchesRowMajor) {
  for (int64_t c : {16, 24, 40}) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      BlockedCase bc;
      bc.op = op;
      bc.inputs = {RandomTensor({1, c, 6, 5}, 1), RandomTensor({1, c, 6, 5}, 2)};
      bc.constant = {false, false};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, std::string(op) + " c=" + std::to_string(c));
    }
  }
}

TEST(BlockedLayoutElementwise, BinaryPerChannelMatchesRowMajor) {
  for (int64_t c : {16, 24, 40}) {
    for (const char* op : {"Mul", "Add", "Div", "Sub"}) {
      const std::string what = std::string(op) + " c=" + std::to_string(c);
      // Squeeze-Excitation: a computed [1, C, 1, 1] scale (blocked too), either side.
      BlockedCase bc;
      bc.op = op;
      bc.inputs = {RandomTensor({1, c, 6, 5}, 1), RandomTensor({1, c, 1, 1}, 2)};
      bc.constant = {false, false};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " computed [1,C,1,1]");
      std::swap(bc.inputs[0], bc.inputs[1]);
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " computed [1,C,1,1] first");
      // More pixels than one run of the repeated scale (64), and not a multiple of it.
      bc.inputs = {RandomTensor({1, c, 9, 17}, 1), RandomTensor({1, c, 1, 1}, 2)};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " computed [1,C,1,1], 153 pixels");
      std::swap(bc.inputs[0], bc.inputs[1]);
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " computed [1,C,1,1] first, 153 pixels");
      // Batch 2 with a per-image scale.
      bc.inputs = {RandomTensor({2, c, 4, 3}, 1), RandomTensor({2, c, 1, 1}, 2)};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " computed [N,C,1,1]");
      // Batch 2 with one scale for both images.
      bc.inputs = {RandomTensor({2, c, 4, 3}, 1), RandomTensor({1, c, 1, 1}, 2)};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " batch 2, computed [1,C,1,1]");
      bc.constant = {false, true};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " batch 2, constant [1,C,1,1]");
      bc.constant = {false, false};
      // Constants (row-major): [C,1,1], [1,C,1,1], a scalar, a per-pixel [1,1,H,W].
      bc.inputs = {RandomTensor({1, c, 6, 5}, 1), RandomTensor({c, 1, 1}, 2)};
      bc.constant = {false, true};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " constant [C,1,1]");
      bc.inputs[1] = RandomTensor({1, c, 1, 1}, 3);
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " constant [1,C,1,1]");
      bc.inputs[1] = conv_test::Floats({}, {3.0f});
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " constant scalar");
      bc.inputs[1] = RandomTensor({1, 1, 6, 5}, 4);
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " constant [1,1,H,W]");
      bc.inputs[1] = RandomTensor({1, c, 6, 5}, 5);
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " constant same shape");
      // A computed single value (rank 1, so row-major).
      bc.inputs[1] = conv_test::Floats({1}, {0.5f});
      bc.constant = {false, false};
      blocked_test::ExpectBlockedMatchesRowMajor(bc, what + " computed [1]");
    }
  }
}

TEST(BlockedLayoutElementwise, BinaryRefusesComputedSpatialBroadcasts) {
  // A computed [1, 1, H, W] map (spatial attention) is blocked with one
  // channel; broadcasting it over the channels is not taken.
  BlockedCase bc;
  bc.op = "Mul";
  bc.inputs = {RandomTensor({1, 24, 6, 5}, 1), RandomTensor({1, 1, 6, 5}, 2)};
  bc.constant = {false, false};
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "computed [1,1,H,W]");
}

}  // namespace blocked_layout_elementwise_tests
}  // namespace kiln
