// 3x3 stride-1 convolutions on nchw16c activations through oneDNN's
// Winograd kernel (conv_onednn.h, PreferOneDnnWinograd): through the Conv
// entry against the row-major convolution, as the layout stage runs them,
// with KILN_CONV=onednn-winograd; and the shapes the unforced choice sends
// there. Channel counts that are not multiples of 16 (padding lanes in and
// out), images whose sides are odd (a last tile of one output row or
// column), pads of 0 and 2, and the residual before and after the ReLU;
// the other activations, which it does not fuse, stay on other kernels.
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_onednn.h"
#include "unit/tensor_ops/conv_nchw16c_test_util.h"

namespace kiln {
namespace conv_nchw16c_winograd_tests {

using blocked_test::BlockedCase;
using blocked_test::BlockedImplementation;
using blocked_test::ConvShape;

ConvShape Conv3x3(int64_t c, int64_t m, int64_t h, int64_t w, int64_t pad = 1) {
  return {c, m, h, w, 3, 1, pad, 1};
}

bool IsWinograd(const std::string& impl) {
  return impl.find("wino") != std::string::npos;
}

// Forced onto the Winograd kernel; `taken`: oneDNN must have one for the
// shape on an AVX-512 machine (elsewhere another kernel runs it, as right).
void Check(const ConvShape& s, const std::string& activation, bool residual, bool residual_first,
           bool taken) {
  const BlockedCase bc = blocked_test::ConvCase(s, activation, residual, residual_first, 31);
  const std::string what =
      blocked_test::ConvName(s, activation, residual) + (residual_first ? " (sum first)" : "");
  setenv("KILN_CONV", "onednn-winograd", 1);
  blocked_test::ExpectBlockedMatchesRowMajor(bc, what);
  const std::string impl = BlockedImplementation(bc);
  unsetenv("KILN_CONV");
  if (cpu::BestIsa() == cpu::Isa::kAvx512 && taken) {
    EXPECT_TRUE(IsWinograd(impl)) << what << ": " << impl;
  } else if (cpu::BestIsa() != cpu::Isa::kAvx512) {
    EXPECT_FALSE(IsWinograd(impl)) << what << ": " << impl;
  }
}

TEST(ConvNchw16cWinograd, MatchesRowMajor) {
  // ResNet-18's, SqueezeNet's and YOLOv8n's layers at fewer channels, and
  // odd images and channel counts.
  for (const ConvShape& s : {Conv3x3(64, 64, 28, 28), Conv3x3(16, 64, 27, 27), Conv3x3(32, 32, 20, 20),
                             Conv3x3(48, 80, 13, 13), Conv3x3(80, 80, 10, 10)}) {
    Check(s, "Relu", true, true, true);
    Check(s, "", false, false, true);
  }
  for (const ConvShape& s : {Conv3x3(24, 40, 9, 11), Conv3x3(40, 20, 15, 17), Conv3x3(17, 33, 8, 8, 0),
                             Conv3x3(32, 48, 12, 10, 2)}) {
    Check(s, "", false, false, false);
    Check(s, "Relu", true, true, false);
  }
  // A residual added after the ReLU (kiln adds it after the primitive).
  Check(Conv3x3(32, 40, 16, 16), "Relu", true, false, true);
  // Activations the kernel does not fuse: another kernel runs them.
  for (const char* activation :
       {"LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Silu", "Sigmoid", "Tanh"}) {
    Check(Conv3x3(32, 40, 16, 16), activation, true, false, false);
    EXPECT_FALSE(IsWinograd(
        BlockedImplementation(blocked_test::ConvCase(Conv3x3(32, 40, 16, 16), activation, false, false, 37))))
        << activation;
  }
}

// Unforced: the 3x3 stride-1 layers of two or more output blocks on images
// at least 8 wide take it on AVX-512; one block of 16 channels in and out,
// 7-wide images (ResNet's layer4) and strided layers do not.
TEST(ConvNchw16cWinograd, RunsWhereMeasuredFaster) {
  for (const ConvShape& s : {Conv3x3(64, 64, 56, 56), Conv3x3(128, 128, 28, 28), Conv3x3(256, 256, 14, 14),
                             Conv3x3(16, 64, 55, 55), Conv3x3(128, 128, 10, 10), Conv3x3(80, 80, 40, 40)}) {
    const BlockedCase bc = blocked_test::ConvCase(s, "Relu", true, true, 41);
    EXPECT_EQ(IsWinograd(BlockedImplementation(bc)), cpu::BestIsa() == cpu::Isa::kAvx512)
        << blocked_test::ConvName(s, "Relu", true);
  }
  for (const ConvShape& s : {Conv3x3(16, 16, 80, 80), Conv3x3(512, 512, 7, 7),
                             ConvShape{64, 128, 56, 56, 3, 2, 1, 1}, ConvShape{64, 64, 28, 28, 5, 1, 2, 1}}) {
    const BlockedCase bc = blocked_test::ConvCase(s, "Relu", false, false, 43);
    EXPECT_FALSE(IsWinograd(BlockedImplementation(bc))) << blocked_test::ConvName(s, "Relu", false);
  }
  cpu::Window3 g = blocked_test::ConvWindow(Conv3x3(64, 64, 28, 28));
  EXPECT_TRUE(cpu::PreferOneDnnWinograd(g, {}, cpu::Isa::kAvx512));
  EXPECT_FALSE(cpu::PreferOneDnnWinograd(g, {}, cpu::Isa::kAvx2));
  FusedEpilogue silu;
  silu.activation = FusedActivation::kSilu;
  EXPECT_FALSE(cpu::PreferOneDnnWinograd(g, silu, cpu::Isa::kAvx512));
  g.dilation = {1, 2, 2};
  EXPECT_FALSE(cpu::PreferOneDnnWinograd(g, {}, cpu::Isa::kAvx512));
}

}  // namespace conv_nchw16c_winograd_tests
}  // namespace kiln
