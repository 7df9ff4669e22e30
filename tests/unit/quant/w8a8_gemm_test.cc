// The W8A8 int8 GEMM: per-channel weight packing, per-token activation
// quantization, the reference kernel against an independent computation,
// every vector kernel this CPU runs against the reference bit for bit
// (any shape, stride, thread count), and the error against fp32.
#include "backend/cpu/w8a8/int8_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/w8a8/int8_weight.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace w8a8_gemm_tests {

std::vector<float> Gaussian(int64_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

Int8Weight Pack(const std::vector<float>& w, int64_t n, int64_t k) {
  auto packed = PackInt8Weight(DType::kF32, w.data(), n, k);
  EXPECT_TRUE(packed.ok()) << packed.status().ToString();
  return std::move(packed).value();
}

// y computed from the definition, independently of the kernels: the int8
// values of x and w by their formulas, an int64 dot product, one fma.
std::vector<float> Definition(const std::vector<float>& x, int64_t rows, int64_t ldx, const std::vector<float>& w,
                              int64_t n, int64_t k, const float* bias, float static_clip) {
  std::vector<float> y(static_cast<size_t>(rows * n));
  for (int64_t m = 0; m < rows; ++m) {
    float clip = static_clip;
    if (clip == 0) {
      for (int64_t i = 0; i < k; ++i) clip = std::max(clip, std::fabs(x[static_cast<size_t>(m * ldx + i)]));
    }
    const float sx = clip / 127.0f, inv_x = clip > 0 ? 127.0f / clip : 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      float amax = 0;
      for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(w[static_cast<size_t>(j * k + i)]));
      const float sw = amax / 127.0f, inv_w = amax > 0 ? 127.0f / amax : 0.0f;
      int64_t sum = 0;
      for (int64_t i = 0; i < k; ++i) {
        auto qx = static_cast<int64_t>(std::clamp(std::nearbyint(x[static_cast<size_t>(m * ldx + i)] * inv_x), -127.0f, 127.0f));
        auto qw = static_cast<int64_t>(std::clamp(std::nearbyint(w[static_cast<size_t>(j * k + i)] * inv_w), -127.0f, 127.0f));
        sum += qx * qw;
      }
      y[static_cast<size_t>(m * n + j)] =
          std::fma(static_cast<float>(sum), sx * sw, bias != nullptr ? bias[j] : 0.0f);
    }
  }
  return y;
}

std::vector<Int8Kernel> AvailableKernels() {
  std::vector<Int8Kernel> kernels;
  for (Int8Kernel k : {Int8Kernel::kReference, Int8Kernel::kAvx2, Int8Kernel::kAvxVnni, Int8Kernel::kAvx512Vnni}) {
    if (Int8KernelAvailable(k)) kernels.push_back(k);
  }
  return kernels;
}

TEST(W8A8Weight, PerChannelSymmetricPacking) {
  const int64_t n = 37, k = 37;  // neither a whole panel nor whole groups
  auto w = Gaussian(n * k, 1);
  for (int64_t i = 0; i < k; ++i) w[static_cast<size_t>(5 * k + i)] = 0.0f;  // a row of zeros
  Int8Weight p = Pack(w, n, k);
  EXPECT_EQ(p.rows(), n);
  EXPECT_EQ(p.cols(), k);
  EXPECT_EQ(p.padded_cols(), 40);
  EXPECT_EQ(p.panels(), 3);
  for (int64_t j = 0; j < n; ++j) {
    float amax = 0;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(w[static_cast<size_t>(j * k + i)]));
    EXPECT_EQ(p.scales()[j], amax / 127.0f);
    int32_t sum = 0, extremes = 0;
    for (int64_t i = 0; i < k; ++i) {
      int8_t q = p.At(j, i);
      EXPECT_LE(std::abs(static_cast<int>(q)), 127);
      // Within half a step of the weight.
      EXPECT_LE(std::fabs(q * p.scales()[j] - w[static_cast<size_t>(j * k + i)]), 0.5f * p.scales()[j] * 1.0001f);
      sum += q;
      extremes += std::abs(static_cast<int>(q)) == 127;
    }
    EXPECT_EQ(p.row_sums()[j], sum);
    if (j != 5) {
      EXPECT_GE(extremes, 1) << "the largest weight maps to +-127";
    }
  }
  EXPECT_EQ(p.scales()[5], 0.0f);
  EXPECT_EQ(p.scales()[40], 0.0f);  // padding rows
}

TEST(W8A8Weight, RefusesBadInput) {
  std::vector<float> w(64, 1.0f);
  w[9] = std::nanf("");
  auto bad = PackInt8Weight(DType::kF32, w.data(), 4, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("row 0 column 9"), std::string::npos) << bad.status().ToString();
  EXPECT_EQ(PackInt8Weight(DType::kF32, w.data(), 0, 16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackInt8Weight(DType::kF32, w.data(), 1, kInt8MaxK + 1).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(PackInt8Weight(DType::kQ8_0, w.data(), 1, 16).status().code(), StatusCode::kInvalidArgument);
}

TEST(W8A8Gemm, ReferenceMatchesTheDefinition) {
  const int64_t rows = 5, n = 21, k = 70, ldx = 75;
  auto x = Gaussian(rows * ldx, 2);
  auto w = Gaussian(n * k, 3, 0.05f);
  auto bias = Gaussian(n, 4);
  Int8Weight p = Pack(w, n, k);
  for (float clip : {0.0f, 1.5f}) {
    for (const float* b : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
      std::vector<float> y(static_cast<size_t>(rows * n), -7.0f);
      W8A8LinearWith(Int8Kernel::kReference, KernelContext{}, rows, x.data(), ldx, p, b, y.data(), n, {clip});
      auto expected = Definition(x, rows, ldx, w, n, k, b, clip);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], expected[i]) << "clip " << clip << " at " << i;
    }
  }
}

TEST(W8A8Gemm, StaticClipSaturates) {
  const int64_t k = 8;
  std::vector<float> w(static_cast<size_t>(k), 0.0f);
  w[0] = 1.0f;  // y = x[0] through the int8 path
  Int8Weight p = Pack(w, 1, k);
  std::vector<float> x(static_cast<size_t>(k), 0.0f);
  float y = 0;
  x[0] = 10.0f;  // beyond the clip: saturates at 127 steps of 2/127
  W8A8Linear(KernelContext{}, 1, x.data(), k, p, nullptr, &y, 1, {2.0f});
  EXPECT_FLOAT_EQ(y, 2.0f);
  x[0] = -0.5f;  // within: one rounding of 2/127 steps
  W8A8Linear(KernelContext{}, 1, x.data(), k, p, nullptr, &y, 1, {2.0f});
  EXPECT_NEAR(y, -0.5f, 1.0f / 127);
  // Zeros stay zeros, dynamic or static.
  std::fill(x.begin(), x.end(), 0.0f);
  W8A8Linear(KernelContext{}, 1, x.data(), k, p, nullptr, &y, 1);
  EXPECT_EQ(y, 0.0f);
}

struct Shape {
  int64_t rows, n, k;
};

TEST(W8A8Gemm, EveryKernelEqualsTheReferenceBitForBit) {
  ThreadPool pool(3);
  KernelContext threaded;
  threaded.pool = &pool;
  const std::vector<Shape> shapes = {{1, 1, 1},    {1, 16, 4},   {3, 17, 5},     {4, 32, 64},  {5, 33, 130},
                                     {8, 48, 256}, {9, 15, 257}, {19, 100, 96}, {33, 64, 384}, {2, 130, 1000}};
  for (Int8Kernel kernel : AvailableKernels()) {
    for (const Shape& s : shapes) {
      const int64_t ldx = s.k + 3, ldy = s.n + 5;
      auto x = Gaussian(s.rows * ldx, static_cast<uint32_t>(s.rows * 7 + s.n), 2.0f);
      auto w = Gaussian(s.n * s.k, static_cast<uint32_t>(s.k), 0.02f);
      auto bias = Gaussian(s.n, 9);
      Int8Weight p = Pack(w, s.n, s.k);
      for (float clip : {0.0f, 3.0f}) {
        for (const float* b : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
          std::vector<float> expected(static_cast<size_t>(s.rows * ldy), 123.0f), got = expected, got_mt = expected;
          W8A8LinearWith(Int8Kernel::kReference, KernelContext{}, s.rows, x.data(), ldx, p, b, expected.data(), ldy,
                         {clip});
          W8A8LinearWith(kernel, KernelContext{}, s.rows, x.data(), ldx, p, b, got.data(), ldy, {clip});
          W8A8LinearWith(kernel, threaded, s.rows, x.data(), ldx, p, b, got_mt.data(), ldy, {clip});
          for (size_t i = 0; i < expected.size(); ++i) {
            ASSERT_EQ(got[i], expected[i]) << Int8KernelName(kernel) << " rows " << s.rows << " n " << s.n << " k "
                                           << s.k << " clip " << clip << " at " << i;
            ASSERT_EQ(got_mt[i], expected[i]) << Int8KernelName(kernel) << " threaded, at " << i;
          }
          // Columns past n (the stride's padding) are untouched.
          for (int64_t m = 0; m < s.rows; ++m) {
            for (int64_t c = s.n; c < ldy; ++c) ASSERT_EQ(got[static_cast<size_t>(m * ldy + c)], 123.0f);
          }
        }
      }
    }
  }
}

// The largest sums the int32 accumulators meet: every activation and weight
// at +-127 over the longest row the kernels take.
TEST(W8A8Gemm, ExtremeSumsDoNotOverflow) {
  const int64_t n = 16, k = kInt8MaxK;
  std::vector<float> w(static_cast<size_t>(n * k), 1.0f);
  for (int64_t j = 0; j < n; j += 2) {
    for (int64_t i = 0; i < k; ++i) w[static_cast<size_t>(j * k + i)] = -1.0f;
  }
  Int8Weight p = Pack(w, n, k);
  std::vector<float> x(static_cast<size_t>(2 * k), 1.0f);
  for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(k + i)] = -1.0f;
  for (Int8Kernel kernel : AvailableKernels()) {
    std::vector<float> y(static_cast<size_t>(2 * n));
    W8A8LinearWith(kernel, KernelContext{}, 2, x.data(), k, p, nullptr, y.data(), n);
    for (int64_t m = 0; m < 2; ++m) {
      for (int64_t j = 0; j < n; ++j) {
        float sign = (m == 0 ? 1.0f : -1.0f) * (j % 2 == 0 ? -1.0f : 1.0f);
        EXPECT_FLOAT_EQ(y[static_cast<size_t>(m * n + j)], sign * static_cast<float>(k)) << Int8KernelName(kernel);
      }
    }
  }
}

TEST(W8A8Gemm, CloseToFp32AndBf16InputAgrees) {
  const int64_t rows = 6, n = 64, k = 512;
  auto x = Gaussian(rows * k, 21);
  auto w = Gaussian(n * k, 22, 0.05f);
  Int8Weight p = Pack(w, n, k);
  std::vector<float> y(static_cast<size_t>(rows * n));
  W8A8Linear(KernelContext{}, rows, x.data(), k, p, nullptr, y.data(), n);
  double err = 0, ref = 0;
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (int64_t i = 0; i < k; ++i) exact += static_cast<double>(x[static_cast<size_t>(m * k + i)]) * w[static_cast<size_t>(j * k + i)];
      double d = y[static_cast<size_t>(m * n + j)] - exact;
      err += d * d;
      ref += exact * exact;
    }
  }
  EXPECT_LT(std::sqrt(err / ref), 0.02) << "relative rms error of W8A8 against fp32";

  // bf16 rows give what their f32 widening gives.
  std::vector<uint16_t> xb(x.size());
  std::vector<float> widened(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    xb[i] = F32ToBf16(x[i]);
    widened[i] = Bf16ToF32(xb[i]);
  }
  std::vector<float> from_bf16(y.size()), from_widened(y.size());
  W8A8LinearBf16Input(KernelContext{}, rows, xb.data(), k, p, nullptr, from_bf16.data(), n);
  W8A8Linear(KernelContext{}, rows, widened.data(), k, p, nullptr, from_widened.data(), n);
  EXPECT_EQ(from_bf16, from_widened);
}

TEST(W8A8Gemm, KernelChoice) {
  EXPECT_EQ(BestInt8Kernel(Isa::kScalar), Int8Kernel::kReference);
  Int8Kernel best = BestInt8Kernel(BestIsa());
  EXPECT_TRUE(Int8KernelAvailable(best));
  if (Int8KernelAvailable(Int8Kernel::kAvx512Vnni) && BestIsa() == Isa::kAvx512) {
    EXPECT_EQ(best, Int8Kernel::kAvx512Vnni);
  }
  std::printf("int8 kernels here:");
  for (Int8Kernel k : AvailableKernels()) std::printf(" %s", Int8KernelName(k));
  std::printf("\n");
}

}  // namespace w8a8_gemm_tests
}  // namespace kiln::cpu
