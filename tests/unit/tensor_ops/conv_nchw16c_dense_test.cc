// kiln's dense 3x3 convolution on nchw16c activations (conv_nchw16c.h,
// kDense3x3): through the Conv entry against the row-major convolution (as
// the layout stage runs it, on 1 and 2 threads), and the AVX-512 loop
// against the plain reference on the same packed weights. Channel counts
// that are not multiples of 16 (padding lanes, in and out), strides 1 and
// 2, images whose rows are not a multiple of the register tile (and 7-wide
// ones, which take two rows a tile), pads other than 1, and the
// residual before and after the activation.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "unit/tensor_ops/conv_nchw16c_test_util.h"

namespace kiln {
namespace conv_nchw16c_dense_tests {

using blocked_test::BlockedCase;
using blocked_test::BlockedImplementation;

// A 3x3 convolution: channels in and out, image, stride and pad.
struct Shape {
  int64_t c, m, h, w, stride, pad;
};

blocked_test::ConvShape Conv(const Shape& s) {
  return {s.c, s.m, s.h, s.w, 3, s.stride, s.pad, 1};
}

std::string Name(const Shape& s, const std::string& activation, bool residual) {
  return blocked_test::ConvName(Conv(s), activation, residual);
}

BlockedCase Case(const Shape& s, const std::string& activation, bool residual, bool residual_first = false) {
  return blocked_test::ConvCase(Conv(s), activation, residual, residual_first, 21);
}

// Through the Conv entry with KILN_CONV=kiln, so that kiln's kernel runs
// whatever the shape-based choice between it and oneDNN says.
void Check(const Shape& s, const std::string& activation, bool residual, bool residual_first = false) {
  const BlockedCase bc = Case(s, activation, residual, residual_first);
  const std::string what = Name(s, activation, residual);
  setenv("KILN_CONV", "kiln", 1);
  blocked_test::ExpectBlockedMatchesRowMajor(bc, what);
  if (cpu::BestIsa() == cpu::Isa::kAvx512) {
    EXPECT_EQ(BlockedImplementation(bc), "kiln-avx512-nchw16c-3x3") << what;
  }
  unsetenv("KILN_CONV");
}

TEST(ConvNchw16cDense, MatchesRowMajor) {
  for (const Shape& s :
       {Shape{16, 16, 7, 7, 1, 1}, Shape{24, 40, 9, 10, 1, 1}, Shape{40, 20, 15, 17, 1, 1},
        Shape{32, 72, 13, 31, 1, 1}, Shape{20, 36, 11, 29, 2, 1}, Shape{64, 64, 14, 14, 2, 1},
        Shape{48, 80, 6, 5, 2, 1}, Shape{17, 33, 8, 8, 1, 0}, Shape{24, 24, 9, 7, 2, 2}}) {
    Check(s, "", false);
    Check(s, "Relu", true);
    Check(s, "HardSigmoid", false);
  }
  Check({40, 40, 12, 9, 1, 1}, "Relu", true, /*residual_first=*/true);
}

// Whole input blocks and rows wider than 7 read the input without the padded
// copy: the edge tiles skip the taps in the padding, the first and last rows
// the kernel rows outside the image. Pads of 0 and 1, odd images with
// stride 2 (the last pixel's right tap outside the image, or not), rows
// split into tiles of unequal widths, one tile holding both edges.
TEST(ConvNchw16cDense, UnpaddedInputMatchesRowMajor) {
  for (const Shape& s : {Shape{32, 16, 10, 20, 1, 0}, Shape{16, 32, 15, 31, 2, 1},
                         Shape{16, 16, 12, 16, 2, 1}, Shape{32, 48, 9, 29, 1, 1}, Shape{16, 32, 8, 15, 1, 1},
                         Shape{32, 32, 5, 11, 1, 1}, Shape{16, 16, 2, 9, 1, 1}, Shape{48, 24, 3, 19, 2, 0}}) {
    const cpu::Window3 g = blocked_test::ConvWindow(Conv(s));
    const std::vector<float> w(static_cast<size_t>(s.m * s.c * 9));
    const cpu::BlockedConvPlan plan =
        cpu::MakeBlockedConvPlan(g, cpu::BlockedConvShape::kDense3x3, {}, w.data(), nullptr);
    EXPECT_EQ(cpu::BlockedDense3x3PaddedFloats(plan), 0) << Name(s, "", false);
    Check(s, "", false);
    Check(s, "Relu", true);
  }
}

// The packed weights start on a cache line, so that no 64-byte weight load
// spans two (a vector's own storage is only 16-byte aligned).
TEST(ConvNchw16cDense, PackedWeightsStartOnACacheLine) {
  for (const Shape& s : {Shape{16, 16, 8, 8, 1, 1}, Shape{64, 64, 8, 8, 1, 1}, Shape{256, 256, 4, 4, 1, 1},
                         Shape{48, 32, 8, 8, 2, 1}, Shape{512, 512, 2, 2, 1, 1}}) {
    const std::vector<float> w(static_cast<size_t>(s.m * s.c * 9));
    const cpu::BlockedConvPlan plan = cpu::MakeBlockedConvPlan(
        blocked_test::ConvWindow(Conv(s)), cpu::BlockedConvShape::kDense3x3, {}, w.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(plan.weights.data()) % 64, 0u) << Name(s, "", false);
  }
}

TEST(ConvNchw16cDense, ResNetShapesMatchRowMajor) {
  // ResNet-18's 3x3 layers at a quarter of the channels (the shapes of
  // the tiles and of the split between threads are what matters): 56-, 28-,
  // 14- and 7-wide rows, the 3x3/2 downsampling ones, and rows of 7 or
  // fewer pixels two a tile (the last of an odd count alone) with an odd
  // number of output blocks and with padding lanes.
  for (const Shape& s :
       {Shape{16, 16, 56, 56, 1, 1}, Shape{16, 32, 56, 56, 2, 1}, Shape{32, 32, 28, 28, 1, 1},
        Shape{32, 64, 28, 28, 2, 1}, Shape{64, 64, 14, 14, 1, 1}, Shape{64, 128, 14, 14, 2, 1},
        Shape{128, 128, 7, 7, 1, 1}, Shape{64, 80, 7, 7, 1, 1}, Shape{64, 96, 7, 7, 1, 1},
        Shape{64, 104, 7, 7, 1, 1}, Shape{48, 40, 13, 13, 2, 1}, Shape{32, 48, 5, 3, 1, 1}}) {
    Check(s, "Relu", true);
  }
}

// The AVX-512 loop and the plain one on the same packed weights, without a
// pool and on 2 threads, and the plain one against the row-major
// convolution (which runs on any machine).
TEST(ConvNchw16cDense, ReferenceMatchesVectorLoopAndRowMajor) {
  for (const Shape& s : {Shape{24, 40, 9, 7, 1, 1}, Shape{40, 20, 11, 30, 2, 1}, Shape{72, 72, 7, 7, 1, 1},
                         Shape{20, 20, 5, 6, 1, 0}}) {
    SCOPED_TRACE(Name(s, "Sigmoid", true));
    const BlockedCase bc = Case(s, "Sigmoid", true);
    auto expected = blocked_test::RowMajorOutputs(bc);
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    const std::vector<int64_t>& out_dims = (*expected)[0].type().dims;
    const cpu::Window3 g = blocked_test::ConvWindow(Conv(s));
    ASSERT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx512), cpu::BlockedConvShape::kDense3x3);
    FusedEpilogue epilogue;
    epilogue.activation = FusedActivation::kSigmoid;
    const cpu::BlockedConvPlan plan = cpu::MakeBlockedConvPlan(
        g, cpu::BlockedConvShape::kDense3x3, epilogue, bc.inputs[1].As<float>(), bc.inputs[2].As<float>());
    // The input's padding lanes hold NaN: the kernels must not read them
    // into a result.
    const std::vector<float> x = blocked_test::ToBlocked(bc.inputs[0].As<float>(), bc.inputs[0].type().dims,
                                                         std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> x_zero =
        blocked_test::ToBlocked(bc.inputs[0].As<float>(), bc.inputs[0].type().dims);
    const std::vector<float> r = blocked_test::ToBlocked(bc.inputs[3].As<float>(), out_dims);
    std::vector<float> y(static_cast<size_t>(blocked_test::BlockedCount(out_dims)),
                         std::numeric_limits<float>::quiet_NaN());
    cpu::RunBlockedConvReference(plan, x_zero.data(), r.data(), y.data());
    EXPECT_EQ(blocked_test::NonZeroPadding(y.data(), out_dims), 0);
    const std::vector<float> got = blocked_test::FromBlocked(y.data(), out_dims);
    conv_test::ExpectClose(got.data(), (*expected)[0].As<float>(), (*expected)[0].type().ElementCount(),
                           1e-4f, "reference vs row-major");
    if (cpu::BestIsa() != cpu::Isa::kAvx512) continue;
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &DefaultThreadPool(2)}) {
      std::vector<float> v(y.size(), std::numeric_limits<float>::quiet_NaN());
      std::vector<float> scratch(static_cast<size_t>(cpu::BlockedConvScratchFloats(plan, 2)));
      cpu::RunBlockedConvAvx512(plan, x.data(), r.data(), v.data(), pool, scratch.data(), 2);
      EXPECT_EQ(blocked_test::NonZeroPadding(v.data(), out_dims), 0);
      conv_test::ExpectClose(v.data(), y.data(), static_cast<int64_t>(y.size()), 1e-5f,
                             pool != nullptr ? "avx512 (2 threads) vs reference" : "avx512 vs reference");
    }
  }
}

// Unforced, the Conv entry picks kiln's loop where it beats oneDNN's
// (ResNet-18's 7-wide layers, and the 3x3/2 downsamples on Intel's cores
// and on Zen 5) and oneDNN elsewhere: its Winograd kernel for the stride-1
// layers on wider images (PreferOneDnnWinograd), its direct one for the rest.
TEST(ConvNchw16cDense, RunsWhereMeasuredFaster) {
  if (cpu::BestIsa() != cpu::Isa::kAvx512) GTEST_SKIP() << "AVX-512 only";
  const CpuInfo& cpu = GetCpuInfo();
  const bool zen5 = cpu.vendor == "AuthenticAMD" && cpu.family >= 26;
  const bool wide_on_kiln = cpu.vendor != "AuthenticAMD" || zen5;
  for (const Shape& s :
       {Shape{64, 64, 56, 56, 1, 1}, Shape{128, 128, 28, 28, 1, 1}, Shape{256, 256, 14, 14, 1, 1}}) {
    EXPECT_EQ(BlockedImplementation(Case(s, "Relu", true)).rfind("onednn:jit_fp32_wino", 0), 0u)
        << Name(s, "Relu", true);
  }
  EXPECT_EQ(BlockedImplementation(Case({64, 128, 56, 56, 2, 1}, "Relu", true)) == "kiln-avx512-nchw16c-3x3",
            wide_on_kiln)
      << " on " << GetCpuInfo().vendor;
  EXPECT_EQ(BlockedImplementation(Case({512, 512, 7, 7, 1, 1}, "Relu", true)), "kiln-avx512-nchw16c-3x3");
  EXPECT_EQ(BlockedImplementation(Case({256, 512, 14, 14, 2, 1}, "Relu", false)), "kiln-avx512-nchw16c-3x3");
  // YOLOv8n's first 3x3/2 downsample (16 -> 32 channels, 160 -> 80 wide): kiln's except there.
  EXPECT_EQ(BlockedImplementation(Case({16, 32, 160, 160, 2, 1}, "Relu", false)) == "kiln-avx512-nchw16c-3x3",
            wide_on_kiln);
  // One block of 16 channels in and out: oneDNN's direct kernel.
  EXPECT_EQ(BlockedImplementation(Case({16, 16, 80, 80, 1, 1}, "Relu", false)).rfind("onednn:jit:", 0), 0u);
}

TEST(ConvNchw16cDense, TakesOnlyItsShapes) {
  cpu::Window3 g;
  g.in_channels = g.out_channels = 32;
  g.in = {1, 8, 8};
  g.out = {1, 8, 8};
  g.kernel = {1, 3, 3};
  g.pad_begin = g.pad_end = {0, 1, 1};
  EXPECT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx512), cpu::BlockedConvShape::kDense3x3);
  EXPECT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx2), cpu::BlockedConvShape::kNone);
  cpu::Window3 strided = g;
  strided.stride = {1, 2, 2};
  EXPECT_EQ(cpu::KilnBlockedConvShape(strided, cpu::Isa::kAvx512), cpu::BlockedConvShape::kDense3x3);
  strided.stride = {1, 2, 1};
  EXPECT_EQ(cpu::KilnBlockedConvShape(strided, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  strided.stride = {1, 3, 3};
  EXPECT_EQ(cpu::KilnBlockedConvShape(strided, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  cpu::Window3 dilated = g;
  dilated.dilation = {1, 2, 2};
  EXPECT_EQ(cpu::KilnBlockedConvShape(dilated, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  cpu::Window3 grouped = g;
  grouped.group = 2;
  EXPECT_EQ(cpu::KilnBlockedConvShape(grouped, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  cpu::Window3 five = g;
  five.kernel = {1, 5, 5};
  EXPECT_EQ(cpu::KilnBlockedConvShape(five, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  // Three input channels: a stem.
  cpu::Window3 rgb = g;
  rgb.in_channels = 3;
  EXPECT_EQ(cpu::KilnBlockedConvShape(rgb, cpu::Isa::kAvx512), cpu::BlockedConvShape::kStem);
}

}  // namespace conv_nchw16c_dense_tests
}  // namespace kiln
