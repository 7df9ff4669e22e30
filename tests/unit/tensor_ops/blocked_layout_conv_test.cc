// Conv and kiln.FusedConv on nchw16c activations (oneDNN) against the
// row-major kernels: dense, grouped and depthwise, channel counts that are
// and are not multiples of 16, bias, activation and residual.
#include <gtest/gtest.h>

#include "backend/cpu/kernels/isa.h"
#include "unit/tensor_ops/blocked_layout_test_util.h"

namespace kiln {
namespace blocked_layout_conv_tests {

using blocked_test::BlockedCase;
using conv_test::RandomTensor;

struct ConvShape {
  int64_t c, m, h, w, k, stride, group;
};

BlockedCase ConvCase(const ConvShape& s, bool fused) {
  BlockedCase bc;
  bc.op = fused ? "kiln.FusedConv" : "Conv";
  const int64_t pad = s.k / 2;
  bc.attrs.SetInts("kernel_shape", {s.k, s.k});
  bc.attrs.SetInts("strides", {s.stride, s.stride});
  bc.attrs.SetInts("pads", {pad, pad, pad, pad});
  bc.attrs.SetInt("group", s.group);
  bc.inputs = {RandomTensor({1, s.c, s.h, s.w}, 1), RandomTensor({s.m, s.c / s.group, s.k, s.k}, 2),
               RandomTensor({s.m}, 3)};
  bc.constant = {false, true, true};
  if (fused) {
    bc.attrs.SetString("activation", "Silu");
    const int64_t oh = (s.h + 2 * pad - s.k) / s.stride + 1, ow = (s.w + 2 * pad - s.k) / s.stride + 1;
    bc.inputs.push_back(RandomTensor({1, s.m, oh, ow}, 4));
    bc.constant.push_back(false);
  }
  bc.tol = 1e-4f;
  // oneDNN's AVX2 kernels block by 8: on nchw16c it has only its reference loops there.
  bc.expect_taken = cpu::BestIsa() == cpu::Isa::kAvx512;
  return bc;
}

TEST(BlockedLayoutConv, DenseMatchesRowMajor) {
  for (const ConvShape& s : {ConvShape{16, 16, 9, 7, 3, 1, 1}, ConvShape{24, 40, 8, 8, 3, 2, 1},
                             ConvShape{40, 24, 6, 5, 1, 1, 1}, ConvShape{16, 40, 7, 7, 1, 1, 1}}) {
    for (bool fused : {false, true}) {
      blocked_test::ExpectBlockedMatchesRowMajor(ConvCase(s, fused),
                                                 "c=" + std::to_string(s.c) + " m=" + std::to_string(s.m) +
                                                     " k=" + std::to_string(s.k) + (fused ? " fused" : ""));
    }
  }
}

TEST(BlockedLayoutConv, ResidualBeforeActivationMatchesRowMajor) {
  // ResNet's Add then Relu.
  BlockedCase bc = ConvCase({24, 24, 6, 6, 3, 1, 1}, true);
  bc.attrs.SetString("activation", "Relu");
  bc.attrs.SetInt("residual_before_activation", 1);
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "residual then Relu");
}

TEST(BlockedLayoutConv, DepthwiseMatchesRowMajor) {
  for (const ConvShape& s : {ConvShape{16, 16, 9, 9, 3, 1, 16}, ConvShape{24, 24, 10, 9, 3, 2, 24},
                             ConvShape{40, 40, 7, 7, 5, 1, 40}}) {
    for (bool fused : {false, true}) {
      blocked_test::ExpectBlockedMatchesRowMajor(
          ConvCase(s, fused),
          "depthwise c=" + std::to_string(s.c) + " k=" + std::to_string(s.k) + (fused ? " fused" : ""));
    }
  }
}

TEST(BlockedLayoutConv, GroupedByBlocksMatchesRowMajor) {
  // Groups of 16 channels fit the blocks.
  blocked_test::ExpectBlockedMatchesRowMajor(ConvCase({32, 32, 6, 6, 3, 1, 2}, false), "2 groups of 16");
  blocked_test::ExpectBlockedMatchesRowMajor(ConvCase({32, 64, 6, 6, 1, 1, 2}, true), "2 groups of 16 -> 32");
}

TEST(BlockedLayoutConv, GroupsAcrossBlocksAreLeftRowMajor) {
  // Groups of 12 channels straddle the blocks: oneDNN has only its reference loops for that.
  BlockedCase bc = ConvCase({24, 24, 6, 6, 3, 1, 2}, false);
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "2 groups of 12");
}

TEST(BlockedLayoutConv, OneByOneImagesTakeBlockedOnlyAsMatrixVectorProducts) {
  // Squeeze-Excitation's products on a 1x1 image: kiln's nchw16c 1x1 kernel
  // runs them as matrix-vector products (AVX-512), so the block around them
  // can stay blocked.
  blocked_test::ExpectBlockedMatchesRowMajor(ConvCase({32, 16, 1, 1, 1, 1, 1}, false), "1x1 image");
  blocked_test::ExpectBlockedMatchesRowMajor(ConvCase({24, 40, 1, 1, 1, 1, 1}, true), "1x1 image, fused");
  // Any other kernel there would be a oneDNN call: cheaper row-major (the
  // kernel still runs blocked when asked).
  BlockedCase bc = ConvCase({32, 16, 1, 1, 3, 1, 1}, false);
  bc.expect_taken = false;
  blocked_test::ExpectBlockedMatchesRowMajor(bc, "1x1 image, 3x3 kernel");
}

}  // namespace blocked_layout_conv_tests
}  // namespace kiln
