// Elementwise kernels: the vector exp/tanh/erf against libm over the whole
// float range, the activations against double-precision definitions,
// arithmetic and conversions exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/kernels/convert.h"
#include "backend/cpu/kernels/elementwise.h"
#include "backend/cpu/kernels/vector_math.h"
#include "core/half.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace elementwise_tests {

using testing::AllIsas;
using testing::BitEqual;
using testing::ContextFor;
using testing::RandomFloats;
using testing::VectorIsas;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Many values over [lo, hi], evenly spaced plus random, plus the ends.
std::vector<float> Sweep(float lo, float hi, int n) {
  std::vector<float> v;
  for (int i = 0; i <= n; ++i) v.push_back(lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n));
  std::vector<float> r = RandomFloats(static_cast<size_t>(n), 77, lo, hi);
  v.insert(v.end(), r.begin(), r.end());
  return v;
}

class VectorMathTest : public ::testing::TestWithParam<Isa> {};

// The worst error in ulps of f against the double-precision g over xs
// (results below the smallest normal float are compared absolutely).
template <typename F, typename G>
double WorstUlps(F f, G g, const std::vector<float>& xs, float* worst_x) {
  std::vector<float> y(xs.size());
  f(xs.data(), y.data(), static_cast<int64_t>(xs.size()));
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = g(static_cast<double>(xs[i]));
    // One ulp of the float nearest the true value; subnormals have a fixed step.
    const double ulp = std::fabs(want) < std::numeric_limits<float>::min()
                           ? std::numeric_limits<float>::denorm_min()
                           : std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
    const double ulps = std::fabs(y[i] - want) / ulp;
    if (ulps > worst) {
      worst = ulps;
      *worst_x = xs[i];
    }
  }
  return worst;
}

TEST_P(VectorMathTest, ExpIsWithinAFewUlpsEverywhere) {
  const Isa isa = GetParam();
  KILN_SKIP_UNLESS_AVAILABLE(isa);
  auto f = [isa](const float* x, float* y, int64_t n) { VectorExp(isa, x, y, n); };
  auto g = [](double x) { return std::exp(x); };
  float at = 0;
  EXPECT_LE(WorstUlps(f, g, Sweep(-87.0f, 88.7f, 200000), &at), 2.0) << "at " << at;
  EXPECT_LE(WorstUlps(f, g, Sweep(-1.0f, 1.0f, 50000), &at), 2.0) << "at " << at;
  // Subnormal results: within a couple of the smallest steps.
  EXPECT_LE(WorstUlps(f, g, Sweep(-103.9f, -87.4f, 20000), &at), 2.0) << "at " << at;

  const std::vector<float> special = {
      -kInf, -1000.0f, -104.5f, 89.0f, 100.0f, kInf, 0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(special.size());
  VectorExp(isa, special.data(), y.data(), static_cast<int64_t>(special.size()));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], kInf);  // e^89 overflows float
  EXPECT_EQ(y[4], kInf);
  EXPECT_EQ(y[5], kInf);
  EXPECT_EQ(y[6], 1.0f);
  EXPECT_EQ(y[7], 1.0f);
  EXPECT_TRUE(std::isnan(y[8]));
}

TEST_P(VectorMathTest, TanhIsWithinAFewUlpsEverywhere) {
  const Isa isa = GetParam();
  KILN_SKIP_UNLESS_AVAILABLE(isa);
  auto f = [isa](const float* x, float* y, int64_t n) { VectorTanh(isa, x, y, n); };
  auto g = [](double x) { return std::tanh(x); };
  float at = 0;
  EXPECT_LE(WorstUlps(f, g, Sweep(-0.7f, 0.7f, 200000), &at), 3.0) << "at " << at;
  EXPECT_LE(WorstUlps(f, g, Sweep(-12.0f, 12.0f, 200000), &at), 3.0) << "at " << at;
  EXPECT_LE(WorstUlps(f, g, Sweep(-1e-30f, 1e-30f, 1000), &at), 1.0) << "at " << at;
  const std::vector<float> special = {-kInf, kInf, 50.0f, -50.0f, 0.0f};
  std::vector<float> y(special.size());
  VectorTanh(isa, special.data(), y.data(), 5);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_EQ(y[4], 0.0f);
}

TEST_P(VectorMathTest, ErfIsWithinAFewUlpsEverywhere) {
  const Isa isa = GetParam();
  KILN_SKIP_UNLESS_AVAILABLE(isa);
  auto f = [isa](const float* x, float* y, int64_t n) { VectorErf(isa, x, y, n); };
  auto g = [](double x) { return std::erf(x); };
  float at = 0;
  EXPECT_LE(WorstUlps(f, g, Sweep(-1.0f, 1.0f, 200000), &at), 3.0) << "at " << at;
  EXPECT_LE(WorstUlps(f, g, Sweep(-6.0f, 6.0f, 200000), &at), 3.0) << "at " << at;
  EXPECT_LE(WorstUlps(f, g, Sweep(-1e-20f, 1e-20f, 1000), &at), 2.0) << "at " << at;
  const std::vector<float> special = {-kInf, kInf, 0.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(special.size());
  VectorErf(isa, special.data(), y.data(), 4);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_TRUE(std::isnan(y[3]));
}

INSTANTIATE_TEST_SUITE_P(Isas, VectorMathTest, ::testing::ValuesIn(VectorIsas()), testing::IsaParamName);

class ElementwiseTest : public ::testing::TestWithParam<Isa> {};

double SiluOf(double x) {
  return x / (1 + std::exp(-x));
}
double GeluErfOf(double x) {
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}
// 0.5 x (1 + tanh(u)) written as x / (1 + e^(-2u)), which is the same and
// keeps its precision where 1 + tanh(u) would cancel.
double GeluTanhOf(double x) {
  const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1 + std::exp(-2 * u));
}

// How many ulps of relative error fp32 evaluation of f can add at x beyond
// the kernel's own: the tanh form's e^(-2u) turns the few roundings in
// computing u = sqrt(2/pi) (x + 0.044715 x^3) into ~3|2u| ulps.
double NoConditioning(double) {
  return 0.0;
}
double GeluTanhConditioning(double x) {
  return 6.0 * std::fabs(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
}
TEST_P(ElementwiseTest, ActivationsMatchTheirDefinitions) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const KernelContext ctx = ContextFor(GetParam(), 2);
  for (int64_t cols : {1, 3, 17, 33, 127, 4864}) {
    const int64_t rows = 3, ld = 2 * cols + 1;  // gate and up: halves of one fused row
    std::vector<float> fused = RandomFloats(static_cast<size_t>(rows * ld), 31, -12.0f, 12.0f);
    std::vector<float> out(static_cast<size_t>(rows * cols));
    auto gate = [&](int64_t r, int64_t c) {
      return static_cast<double>(fused[static_cast<size_t>(r * ld + c)]);
    };
    auto up = [&](int64_t r, int64_t c) {
      return static_cast<double>(fused[static_cast<size_t>(r * ld + cols + c)]);
    };
    auto expect = [&](double (*f)(double), double (*conditioning)(double), bool gated, const char* what) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const double want = f(gate(r, c)) * (gated ? up(r, c) : 1.0);
          const double ulps = 8 + conditioning(gate(r, c));
          // Values below 1e-35 may flush to zero (e^-2u overflows first).
          ASSERT_NEAR(out[static_cast<size_t>(r * cols + c)], want, ulps * 6e-8 * std::fabs(want) + 1e-35)
              << what << " at x = " << gate(r, c);
        }
      }
    };
    SiluMul(ctx, rows, cols, fused.data(), ld, fused.data() + cols, ld, out.data(), cols);
    expect(SiluOf, NoConditioning, true, "silu_mul");
    Gelu(ctx, GeluForm::kErf, rows, cols, fused.data(), ld, out.data(), cols);
    expect(GeluErfOf, NoConditioning, false, "gelu");
    Gelu(ctx, GeluForm::kTanh, rows, cols, fused.data(), ld, out.data(), cols);
    expect(GeluTanhOf, GeluTanhConditioning, false, "gelu_tanh");
    GeluMul(ctx, GeluForm::kErf, rows, cols, fused.data(), ld, fused.data() + cols, ld, out.data(), cols);
    expect(GeluErfOf, NoConditioning, true, "gelu_mul");
    GeluMul(ctx, GeluForm::kTanh, rows, cols, fused.data(), ld, fused.data() + cols, ld, out.data(), cols);
    expect(GeluTanhOf, GeluTanhConditioning, true, "gelu_tanh_mul");
  }
}

TEST_P(ElementwiseTest, ArithmeticIsExact) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int threads : {1, 2}) {
    const KernelContext ctx = ContextFor(GetParam(), threads);
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {1, 4864}, {5, 17}, {64, 300}}) {
      const int64_t lda = cols + 2, ldb = cols + 5, ldo = cols + 1;
      std::vector<float> a = RandomFloats(static_cast<size_t>(rows * lda), 41);
      std::vector<float> b = RandomFloats(static_cast<size_t>(rows * ldb), 42);
      std::vector<float> sum(static_cast<size_t>(rows * ldo), 9.0f), product = sum, scaled = sum;
      Add(ctx, rows, cols, a.data(), lda, b.data(), ldb, sum.data(), ldo);
      Mul(ctx, rows, cols, a.data(), lda, b.data(), ldb, product.data(), ldo);
      Scale(ctx, rows, cols, a.data(), lda, 0.125f, scaled.data(), ldo);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const float x = a[static_cast<size_t>(r * lda + c)], y = b[static_cast<size_t>(r * ldb + c)];
          ASSERT_EQ(sum[static_cast<size_t>(r * ldo + c)], x + y);
          ASSERT_EQ(product[static_cast<size_t>(r * ldo + c)], x * y);
          ASSERT_EQ(scaled[static_cast<size_t>(r * ldo + c)], x * 0.125f);
        }
        ASSERT_EQ(sum[static_cast<size_t>(r * ldo + cols)], 9.0f) << "wrote past the row";
      }
    }
  }
}

TEST_P(ElementwiseTest, ActivationsIndependentOfThreadsAndBatch) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const int64_t rows = 9, cols = 4864;
  std::vector<float> gate = RandomFloats(static_cast<size_t>(rows * cols), 51, -8.0f, 8.0f);
  std::vector<float> up = RandomFloats(static_cast<size_t>(rows * cols), 52);
  std::vector<float> one(gate.size()), two(gate.size()), single(static_cast<size_t>(cols));
  SiluMul(ContextFor(GetParam(), 1), rows, cols, gate.data(), cols, up.data(), cols, one.data(), cols);
  SiluMul(ContextFor(GetParam(), 2), rows, cols, gate.data(), cols, up.data(), cols, two.data(), cols);
  EXPECT_TRUE(BitEqual(one.data(), two.data(), one.size()));
  SiluMul(ContextFor(GetParam(), 2), 1, cols, &gate[4 * cols], cols, &up[4 * cols], cols, single.data(),
          cols);
  EXPECT_TRUE(BitEqual(single.data(), &one[4 * cols], static_cast<size_t>(cols)));
}

TEST_P(ElementwiseTest, ConversionsRoundLikeTheScalarOnes) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const KernelContext ctx = ContextFor(GetParam(), 2);
  // Random values of every magnitude, halfway cases, specials and subnormals.
  std::vector<float> values = RandomFloats(2000, 61, -70000.0f, 70000.0f);
  std::vector<float> small = RandomFloats(1000, 62, -1e-6f, 1e-6f);
  values.insert(values.end(), small.begin(), small.end());
  for (float v : {0.0f, -0.0f, kInf, -kInf, 65504.0f, 65520.0f, 1.0f + std::ldexp(1.0f, -11), 1e-45f, -3e-39f,
                  std::ldexp(1.0f, -24), 1.00390625f, 1.01171875f}) {
    values.push_back(v);
  }
  const int64_t cols = 61, rows = static_cast<int64_t>(values.size()) / cols;
  std::vector<uint16_t> bf16(values.size()), f16(values.size());
  ASSERT_TRUE(
      ConvertRows(ctx, rows, cols, DType::kF32, values.data(), cols, DType::kBF16, bf16.data(), cols).ok());
  ASSERT_TRUE(
      ConvertRows(ctx, rows, cols, DType::kF32, values.data(), cols, DType::kF16, f16.data(), cols).ok());
  for (int64_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(bf16[static_cast<size_t>(i)], F32ToBf16(values[static_cast<size_t>(i)]))
        << values[static_cast<size_t>(i)];
    ASSERT_EQ(f16[static_cast<size_t>(i)], F32ToF16(values[static_cast<size_t>(i)]))
        << values[static_cast<size_t>(i)];
  }
  // Back: every 16-bit pattern but NaNs, exactly.
  std::vector<uint16_t> all;
  for (uint32_t h = 0; h < 0x10000; ++h) all.push_back(static_cast<uint16_t>(h));
  std::vector<float> from_bf16(all.size()), from_f16(all.size());
  ASSERT_TRUE(
      ConvertRows(ctx, 256, 256, DType::kBF16, all.data(), 256, DType::kF32, from_bf16.data(), 256).ok());
  ASSERT_TRUE(
      ConvertRows(ctx, 256, 256, DType::kF16, all.data(), 256, DType::kF32, from_f16.data(), 256).ok());
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float b = Bf16ToF32(static_cast<uint16_t>(h)), f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(b)) {
      ASSERT_TRUE(std::isnan(from_bf16[h])) << h;
    } else {
      ASSERT_EQ(from_bf16[h], b) << h;
    }
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(from_f16[h])) << h;
    } else {
      ASSERT_EQ(from_f16[h], f) << h;
    }
  }
  // NaN stays NaN on the way down.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint16_t nan16 = 0;
  ASSERT_TRUE(ConvertRows(ctx, 1, 1, DType::kF32, &nan, 1, DType::kBF16, &nan16, 1).ok());
  EXPECT_TRUE(std::isnan(Bf16ToF32(nan16)));
}

TEST(Convert, RejectsUnsupportedPairsAndCopiesEqualTypes) {
  const KernelContext ctx;
  float a[3] = {1, 2, 3}, b[3] = {};
  EXPECT_EQ(ConvertRows(ctx, 1, 3, DType::kF32, a, 3, DType::kQ8_0, b, 3).code(), StatusCode::kUnsupported);
  EXPECT_EQ(ConvertRows(ctx, 1, 3, DType::kF16, a, 3, DType::kBF16, b, 3).code(), StatusCode::kUnsupported);
  ASSERT_TRUE(ConvertRows(ctx, 1, 3, DType::kF32, a, 3, DType::kF32, b, 3).ok());
  EXPECT_EQ(b[2], 3.0f);
}

INSTANTIATE_TEST_SUITE_P(Isas, ElementwiseTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

}  // namespace elementwise_tests
}  // namespace kiln::cpu
