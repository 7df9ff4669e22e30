// Stem convolutions (few input channels) writing nchw16c: kiln's stem
// kernel (conv_nchw16c.h, kStem) on row-major and on nchw16c input, its
// AVX-512 loops against the plain reference on the same packed weights, and
// the Conv entry with input_layout = "row-major" (oneDNN's nchw -> nChw16c
// kernel, or kiln's where PreferKilnStem says or KILN_CONV=kiln asks)
// against the row-major convolution.
// Output channel counts that are and are not multiples of 16, pads 0 to 3,
// strides 1 and 2, kernels 3 to 7; HardSigmoid's f(0) != 0 checks the
// padding lanes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_layout_preference.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "core/cpu_info.h"
#include "unit/tensor_ops/conv_nchw16c_test_util.h"

namespace kiln {
namespace conv_stem_tests {

using blocked_test::BlockedCase;

struct Stem {
  int64_t c, m, h, w, k, stride, pad;
  std::string activation;
};

blocked_test::ConvShape Conv(const Stem& s) {
  return {s.c, s.m, s.h, s.w, s.k, s.stride, s.pad, 1};
}

std::string Name(const Stem& s) {
  return blocked_test::ConvName(Conv(s), s.activation, false);
}

const std::vector<Stem>& Stems() {
  static const std::vector<Stem> stems = {
      {3, 64, 23, 29, 3, 2, 0, "Relu"},        {3, 16, 30, 31, 3, 2, 1, "HardSwish"},
      {3, 24, 17, 40, 3, 2, 1, "HardSigmoid"}, {3, 20, 33, 27, 7, 2, 3, "Sigmoid"},
      {1, 40, 9, 13, 5, 1, 2, "HardSigmoid"},  {4, 8, 6, 5, 3, 1, 1, ""},
  };
  return stems;
}

BlockedCase Case(const Stem& s) {
  return blocked_test::ConvCase(Conv(s), s.activation, false, false, 21);
}

// The row-major convolution's output.
std::vector<TensorData> Expected(const BlockedCase& bc) {
  auto expected = blocked_test::RowMajorOutputs(bc);
  EXPECT_TRUE(expected.ok()) << expected.status().message();
  return expected.ok() ? *expected : std::vector<TensorData>{};
}

TEST(ConvStem, BlockedInputMatchesRowMajor) {
  for (const Stem& s : Stems()) blocked_test::ExpectBlockedMatchesRowMajor(Case(s), Name(s));
}

// The Conv entry as the layout stage runs a stem: input row-major, output nchw16c.
void CheckRowMajorInput(const Stem& s, const std::string& forced, const std::string& impl_prefix) {
  SCOPED_TRACE(Name(s) + " KILN_CONV=" + forced);
  const BlockedCase bc = Case(s);
  const std::vector<TensorData> expected = Expected(bc);
  ASSERT_EQ(expected.size(), 1u);
  const std::vector<int64_t>& out_dims = expected[0].type().dims;
  AttributeMap attrs = bc.attrs;
  attrs.SetString("activation_layout", "nchw16c");
  attrs.SetString("input_layout", "row-major");
  cpu::TensorKernelArgs args = blocked_test::KernelArgs(bc, attrs);
  args.outputs = {expected[0].type()};
  EXPECT_TRUE(cpu::ConvReadsRowMajorInput(args));
  if (!forced.empty()) setenv("KILN_CONV", forced.c_str(), 1);
  auto kernel = cpu::MakeTensorKernel(args);
  unsetenv("KILN_CONV");
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  EXPECT_EQ(kernel->impl.rfind(impl_prefix, 0), 0u) << kernel->impl;
  const void* ins[3] = {bc.inputs[0].data(), bc.inputs[1].data(), bc.inputs[2].data()};
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &DefaultThreadPool(2)}) {
    std::vector<float> y(static_cast<size_t>(blocked_test::BlockedCount(out_dims)),
                         std::numeric_limits<float>::quiet_NaN());
    void* outs[1] = {y.data()};
    std::vector<float> scratch((kernel->scratch_bytes + 64) / sizeof(float) + 16);
    cpu::TensorCall call;
    call.inputs = ins;
    call.outputs = outs;
    call.scratch = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
    call.pool = pool;
    Status st = kernel->run(call);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(blocked_test::NonZeroPadding(y.data(), out_dims), 0);
    const std::vector<float> got = blocked_test::FromBlocked(y.data(), out_dims);
    conv_test::ExpectClose(got.data(), expected[0].As<float>(), expected[0].type().ElementCount(), 1e-4f,
                           pool != nullptr ? "row-major input (pool)" : "row-major input");
  }
}

TEST(ConvStem, RowMajorInputMatchesRowMajor) {
  if (cpu::BestIsa() != cpu::Isa::kAvx512) GTEST_SKIP() << "stems write nchw16c on AVX-512 only";
  for (const Stem& s : Stems()) {
    const bool kiln = cpu::PreferKilnStem(blocked_test::ConvWindow(Conv(s)));
    CheckRowMajorInput(s, "", kiln ? "kiln-avx512-nchw-to-nchw16c-stem" : "onednn:");
    CheckRowMajorInput(s, "kiln", "kiln-avx512-nchw-to-nchw16c-stem");
    CheckRowMajorInput(s, "onednn", "onednn:");
  }
}

// kiln's stem kernel takes the 7x7 stems on Zen 5, where it was measured
// faster than oneDNN's; oneDNN keeps the 3x3 ones, and every stem elsewhere.
TEST(ConvStem, KilnKernelRunsWhereMeasuredFaster) {
  const CpuInfo& cpu = GetCpuInfo();
  const bool zen5 = cpu.vendor == "AuthenticAMD" && cpu.family >= 26;
  const cpu::Window3 resnet = blocked_test::ConvWindow({3, 64, 224, 224, 7, 2, 3, 1});
  const cpu::Window3 squeezenet = blocked_test::ConvWindow({3, 64, 224, 224, 3, 2, 0, 1});
  EXPECT_EQ(cpu::PreferKilnStem(resnet), zen5);
  EXPECT_FALSE(cpu::PreferKilnStem(squeezenet));
}

// The AVX-512 loops and the plain ones on the same packed weights, on
// row-major and nchw16c input (the plain ones run on any machine).
TEST(ConvStem, ReferenceMatchesVectorLoops) {
  for (const Stem& s : Stems()) {
    SCOPED_TRACE(Name(s));
    const BlockedCase bc = Case(s);
    const std::vector<TensorData> expected = Expected(bc);
    ASSERT_EQ(expected.size(), 1u);
    const std::vector<int64_t>& out_dims = expected[0].type().dims;
    const cpu::Window3 g = blocked_test::ConvWindow(Conv(s));
    ASSERT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx512), cpu::BlockedConvShape::kStem);
    FusedEpilogue epilogue;
    if (!s.activation.empty()) {
      auto parsed = ParseFusedEpilogue("kiln.FusedConv", "stem", bc.attrs);
      ASSERT_TRUE(parsed.ok());
      epilogue = *parsed;
    }
    const std::vector<float> blocked_x =
        blocked_test::ToBlocked(bc.inputs[0].As<float>(), bc.inputs[0].type().dims);
    for (bool row_major : {true, false}) {
      const cpu::BlockedConvPlan plan =
          cpu::MakeBlockedConvPlan(g, cpu::BlockedConvShape::kStem, epilogue, bc.inputs[1].As<float>(),
                                   bc.inputs[2].As<float>(), row_major);
      const float* x = row_major ? bc.inputs[0].As<float>() : blocked_x.data();
      std::vector<float> y(static_cast<size_t>(blocked_test::BlockedCount(out_dims)),
                           std::numeric_limits<float>::quiet_NaN());
      cpu::RunBlockedConvReference(plan, x, nullptr, y.data());
      EXPECT_EQ(blocked_test::NonZeroPadding(y.data(), out_dims), 0);
      const std::vector<float> got = blocked_test::FromBlocked(y.data(), out_dims);
      conv_test::ExpectClose(got.data(), expected[0].As<float>(), expected[0].type().ElementCount(), 1e-4f,
                             "reference vs row-major");
      if (cpu::BestIsa() != cpu::Isa::kAvx512) continue;
      std::vector<float> v(y.size(), std::numeric_limits<float>::quiet_NaN());
      cpu::RunBlockedConvAvx512(plan, x, nullptr, v.data(), nullptr);
      conv_test::ExpectClose(v.data(), y.data(), static_cast<int64_t>(y.size()), 1e-5f,
                             "avx512 vs reference");
    }
  }
}

TEST(ConvStem, OnlyFewInputChannels) {
  cpu::Window3 g;
  g.in_channels = 3;
  g.out_channels = 32;
  g.in = {1, 8, 8};
  g.out = {1, 8, 8};
  g.kernel = {1, 3, 3};
  g.pad_begin = g.pad_end = {0, 1, 1};
  EXPECT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx512), cpu::BlockedConvShape::kStem);
  EXPECT_EQ(cpu::KilnBlockedConvShape(g, cpu::Isa::kAvx2), cpu::BlockedConvShape::kNone);
  cpu::Window3 wide = g;
  wide.in_channels = cpu::kStemMaxInChannels + 1;
  // More channels: a 3x3 is then an ordinary dense layer, a 5x5 nothing of kiln's.
  EXPECT_EQ(cpu::KilnBlockedConvShape(wide, cpu::Isa::kAvx512), cpu::BlockedConvShape::kDense3x3);
  wide.kernel = {1, 5, 5};
  EXPECT_EQ(cpu::KilnBlockedConvShape(wide, cpu::Isa::kAvx512), cpu::BlockedConvShape::kNone);
  cpu::Window3 pointwise = g;
  pointwise.kernel = {1, 1, 1};
  pointwise.pad_begin = pointwise.pad_end = {0, 0, 0};
  EXPECT_EQ(cpu::KilnBlockedConvShape(pointwise, cpu::Isa::kAvx512), cpu::BlockedConvShape::kPointwise);
}

}  // namespace conv_stem_tests
}  // namespace kiln
