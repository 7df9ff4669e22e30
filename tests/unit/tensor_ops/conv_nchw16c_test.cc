// kiln's own nchw16c convolutions (conv_nchw16c.h): the 1x1 GEMM over
// channel blocks and the depthwise loop, against the row-major kernels
// (through the Conv entry, as the layout stage runs them) and the AVX-512
// loops against the plain reference on the same packed weights. Channel
// counts that are and are not multiples of 16, strides 1 and 2, 1x1 images, bias,
// activations (HardSigmoid's f(0) != 0 checks the padding lanes) and the
// residual before and after the activation.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "core/cpu_info.h"
#include "unit/tensor_ops/conv_nchw16c_test_util.h"

namespace kiln {
namespace conv_nchw16c_tests {

using blocked_test::BlockedCase;
using blocked_test::BlockedImplementation;

// A square k x k convolution padded by k / 2: channels in and out, image,
// stride and group.
struct Shape {
  int64_t c, m, h, w, k, stride, group;
};

blocked_test::ConvShape Conv(const Shape& s) {
  return {s.c, s.m, s.h, s.w, s.k, s.stride, s.k / 2, s.group};
}

std::string Name(const Shape& s, const std::string& activation, bool residual) {
  return blocked_test::ConvName(Conv(s), activation, residual);
}

BlockedCase Case(const Shape& s, const std::string& activation, bool residual, bool residual_first = false) {
  return blocked_test::ConvCase(Conv(s), activation, residual, residual_first, 11);
}

void Check(const Shape& s, const std::string& activation, bool residual, bool residual_first = false) {
  const BlockedCase bc = Case(s, activation, residual, residual_first);
  const std::string what = Name(s, activation, residual);
  blocked_test::ExpectBlockedMatchesRowMajor(bc, what);
  if (cpu::BestIsa() == cpu::Isa::kAvx512) {
    EXPECT_EQ(BlockedImplementation(bc).rfind("kiln-avx512-nchw16c", 0), 0u) << what << ": " << BlockedImplementation(bc);
  }
}

TEST(ConvNchw16c, PointwiseMatchesRowMajor) {
  for (const Shape& s :
       {Shape{16, 16, 7, 7, 1, 1, 1}, Shape{24, 40, 8, 9, 1, 1, 1}, Shape{40, 72, 14, 14, 1, 1, 1},
        Shape{72, 24, 13, 11, 1, 2, 1}, Shape{96, 576, 7, 7, 1, 1, 1}, Shape{16, 96, 28, 28, 1, 1, 1},
        Shape{3, 20, 5, 3, 1, 2, 1},
        // Weights past L2's share: threads split the output blocks, not the pixels.
        Shape{256, 320, 5, 6, 1, 1, 1}, Shape{256, 288, 9, 7, 1, 2, 1},
        // 1x1 images: Squeeze-Excitation's products, as matrix-vector products.
        Shape{576, 144, 1, 1, 1, 1, 1}, Shape{144, 576, 1, 1, 1, 1, 1}, Shape{16, 8, 1, 1, 1, 1, 1},
        Shape{40, 10, 1, 1, 1, 2, 1}}) {
    Check(s, "", false);
    Check(s, "HardSwish", true);
    Check(s, "HardSigmoid", false);
  }
  Check({40, 40, 6, 6, 1, 1, 1}, "Relu", true, /*residual_first=*/true);
}

// Unforced, a 1x1 convolution runs on kiln's kernel up to 32 MFLOP on AMD's
// cores and up to 6 on Intel's, where oneDNN's was faster above that; the
// other one computes the same convolution.
TEST(ConvNchw16c, PointwiseRunsWhereMeasuredFaster) {
  if (cpu::BestIsa() != cpu::Isa::kAvx512) GTEST_SKIP() << "AVX-512 only";
  const bool amd = GetCpuInfo().vendor == "AuthenticAMD";
  const Shape mid{16, 72, 56, 56, 1, 1, 1};  // 7.2 MFLOP, MobileNetV3's first expansion
  EXPECT_EQ(BlockedImplementation(Case(mid, "Relu", false)).rfind("kiln-avx512-nchw16c", 0) == 0, amd)
      << BlockedImplementation(Case(mid, "Relu", false));
  blocked_test::ExpectBlockedMatchesRowMajor(Case(mid, "Relu", true), Name(mid, "Relu", true));
  const Shape small{40, 72, 14, 14, 1, 1, 1};  // 1.1 MFLOP
  EXPECT_EQ(BlockedImplementation(Case(small, "Relu", false)).rfind("kiln-avx512-nchw16c", 0), 0u);
}

TEST(ConvNchw16c, DepthwiseMatchesRowMajor) {
  for (int64_t c : {16, 24, 40, 72}) {
    for (int64_t k : {3, 5}) {
      for (int64_t stride : {1, 2}) {
        const Shape s{c, c, 14, 11, k, stride, c};
        Check(s, "", false);
        Check(s, "HardSwish", true);
      }
    }
  }
  // MobileNetV3-Small's depthwise layers.
  for (const Shape& s :
       {Shape{16, 16, 112, 112, 3, 2, 16}, Shape{72, 72, 56, 56, 3, 2, 72}, Shape{96, 96, 28, 28, 5, 2, 96},
        Shape{240, 240, 14, 14, 5, 1, 240}, Shape{576, 576, 14, 14, 5, 2, 576}, Shape{8, 8, 3, 2, 3, 1, 8}}) {
    Check(s, "HardSigmoid", false);
  }
  Check({24, 24, 9, 9, 3, 1, 24}, "Relu", true, /*residual_first=*/true);
  // Rows wider than one register tile (tiles inside the image read it in
  // place, those at its borders a copy), every kernel and stride.
  for (int64_t k : {3, 5}) {
    for (int64_t stride : {1, 2}) {
      Check({40, 40, 19, 45, k, stride, 40}, "HardSwish", true);
      Check({24, 24, 6, 33, k, stride, 24}, "Relu", true, /*residual_first=*/true);
    }
  }
}

TEST(ConvNchw16c, DepthwiseWithRowAndColumnStridesThatDiffer) {
  // PP-OCR's direction classifier: strides (2, 1).
  for (const Shape& s : {Shape{16, 16, 24, 96, 3, 1, 16}, Shape{32, 32, 12, 9, 3, 1, 32},
                         Shape{40, 40, 11, 20, 5, 1, 40}}) {
    BlockedCase bc = Case(s, "HardSigmoid", false);
    bc.attrs.SetInts("strides", {2, 1});
    blocked_test::ExpectBlockedMatchesRowMajor(bc, Name(s, "HardSigmoid", false) + " strides 2,1");
  }
}

// The AVX-512 loops and the plain ones on the same packed weights, and the
// plain ones against the row-major convolution (these run on any machine).
TEST(ConvNchw16c, ReferenceMatchesVectorLoopsAndRowMajor) {
  for (const Shape& s : {Shape{24, 40, 9, 7, 1, 1, 1}, Shape{72, 20, 9, 7, 1, 2, 1},
                         Shape{40, 40, 9, 10, 5, 2, 40}, Shape{24, 24, 7, 7, 3, 1, 24},
                         Shape{96, 24, 1, 1, 1, 1, 1}}) {
    SCOPED_TRACE(Name(s, "Sigmoid", true));
    const BlockedCase bc = Case(s, "Sigmoid", true);
    auto expected = blocked_test::RowMajorOutputs(bc);
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    const std::vector<int64_t>& out_dims = (*expected)[0].type().dims;
    const cpu::Window3 g = blocked_test::ConvWindow(Conv(s));
    FusedEpilogue epilogue;
    epilogue.activation = FusedActivation::kSigmoid;
    const auto shape = s.group == 1 ? cpu::BlockedConvShape::kPointwise : cpu::BlockedConvShape::kDepthwise;
    const cpu::BlockedConvPlan plan =
        cpu::MakeBlockedConvPlan(g, shape, epilogue, bc.inputs[1].As<float>(), bc.inputs[2].As<float>());
    const std::vector<float> x = blocked_test::ToBlocked(bc.inputs[0].As<float>(), bc.inputs[0].type().dims);
    const std::vector<float> r = blocked_test::ToBlocked(bc.inputs[3].As<float>(), out_dims);
    std::vector<float> y(static_cast<size_t>(blocked_test::BlockedCount(out_dims)),
                         std::numeric_limits<float>::quiet_NaN());
    cpu::RunBlockedConvReference(plan, x.data(), r.data(), y.data());
    EXPECT_EQ(blocked_test::NonZeroPadding(y.data(), out_dims), 0);
    const std::vector<float> got = blocked_test::FromBlocked(y.data(), out_dims);
    conv_test::ExpectClose(got.data(), (*expected)[0].As<float>(), (*expected)[0].type().ElementCount(),
                           1e-4f, "reference vs row-major");
    if (cpu::BestIsa() != cpu::Isa::kAvx512) continue;
    std::vector<float> v(y.size(), std::numeric_limits<float>::quiet_NaN());
    cpu::RunBlockedConvAvx512(plan, x.data(), r.data(), v.data(), nullptr);
    conv_test::ExpectClose(v.data(), y.data(), static_cast<int64_t>(y.size()), 1e-5f, "avx512 vs reference");
  }
}

TEST(ConvNchw16c, TakesOnlyItsShapes) {
  cpu::Window3 g;
  g.in_channels = g.out_channels = 32;
  g.in = {1, 8, 8};
  g.out = {1, 8, 8};
  EXPECT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx512), cpu::BlockedConvShape::kPointwise);
  EXPECT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx2), cpu::BlockedConvShape::kNone);
  cpu::Window3 padded = g;
  padded.pad_begin = {0, 1, 1};
  EXPECT_EQ(cpu::KilnBlockedConvShape(padded, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  cpu::Window3 grouped = g;
  grouped.group = 2;
  EXPECT_EQ(cpu::KilnBlockedConvShape(grouped, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  cpu::Window3 depthwise = g;
  depthwise.group = 32;
  depthwise.kernel = {1, 3, 3};
  depthwise.pad_begin = depthwise.pad_end = {0, 1, 1};
  EXPECT_EQ(cpu::KilnBlockedConvShape(depthwise, cpu::Isa::kAvx512), cpu::BlockedConvShape::kDepthwise);
  depthwise.dilation = {1, 2, 2};
  EXPECT_EQ(cpu::KilnBlockedConvShape(depthwise, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  cpu::Window3 five = g;
  five.kernel = {1, 5, 5};
  EXPECT_EQ(cpu::KilnBlockedConvShape(five, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
}

}  // namespace conv_nchw16c_tests
}  // namespace kiln
