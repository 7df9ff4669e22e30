// Round trips through every format QuantizeRowRef writes: the error stays
// within what each format's step allows, special blocks (zeros, constants)
// come back exactly, and invalid sizes are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"
#include "quant/dequantize.h"
#include "quant/ggml_blocks.h"
#include "quant/quantize_ref.h"

namespace kiln {
namespace quantize_formats_tests {

std::vector<float> Gaussian(int64_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<float> RoundTrip(DType dtype, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(*DTypeBytes(dtype, static_cast<uint64_t>(n))));
  EXPECT_TRUE(QuantizeRowRef(dtype, x.data(), q.data(), n).ok());
  std::vector<float> y(x.size());
  EXPECT_TRUE(DequantizeRow(dtype, q.data(), y.data(), n).ok());
  return y;
}

// Root-mean-square error relative to the root-mean-square value.
double RelativeRmsError(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    ref += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// Bounds about 20% above the measured errors; the step of a b-bit format
// over a block of Gaussian values gives roughly 0.29 * 2.5 / 2^(b-1).
struct FormatBound {
  DType dtype;
  double max_relative_rms;  // on Gaussian data
};

class QuantizeFormats : public ::testing::TestWithParam<FormatBound> {};

TEST_P(QuantizeFormats, GaussianRoundTripError) {
  const FormatBound& f = GetParam();
  auto x = Gaussian(256 * 64, 7, 0.02f);
  auto y = RoundTrip(f.dtype, x);
  double e = RelativeRmsError(x, y);
  EXPECT_LT(e, f.max_relative_rms) << DTypeName(f.dtype);
  // A different scale gives the same relative error (scales are per block).
  auto big = x;
  for (float& v : big) v *= 1024.0f;
  EXPECT_NEAR(RelativeRmsError(big, RoundTrip(f.dtype, big)), e, 0.1 * e) << DTypeName(f.dtype);
}

TEST_P(QuantizeFormats, ZerosAndConstantsComeBackExactly) {
  const DType dtype = GetParam().dtype;
  std::vector<float> zeros(512, 0.0f);
  for (float v : RoundTrip(dtype, zeros)) EXPECT_EQ(v, 0.0f) << DTypeName(dtype);
  // A constant power of two is exact where the block's extreme or min is
  // stored as it is (Q8_0, the affine k-quants and the IQ4 formats divide
  // it by 127 or 63: QuantizeIQ4.ConstantBlocks checks those).
  if (dtype == DType::kQ8_0 || dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kIQ4_NL ||
      dtype == DType::kIQ4_XS) {
    return;
  }
  std::vector<float> constant(512, -0.25f);
  for (float v : RoundTrip(dtype, constant)) EXPECT_EQ(v, -0.25f) << DTypeName(dtype);
}

// The k-quants' scale search beats plain rounding at the same bits per
// weight: Q4_K (4.5) against Q4_0 (4.5), Q5_K (5.5) against Q5_0 (5.5).
// The non-linear table fits Gaussian weights better than Q4_0's evenly
// spaced levels at the same 4.5 bits (IQ4_NL) or fewer (IQ4_XS, 4.25).
TEST(QuantizeIQ4, BeatsQ4_0AtNoMoreBits) {
  auto x = Gaussian(256 * 64, 17);
  const double q4_0 = RelativeRmsError(x, RoundTrip(DType::kQ4_0, x));
  EXPECT_LT(RelativeRmsError(x, RoundTrip(DType::kIQ4_NL, x)), 0.9 * q4_0);
  EXPECT_LT(RelativeRmsError(x, RoundTrip(DType::kIQ4_XS, x)), 0.95 * q4_0);
}

// A block of one repeated value maps it onto the table's end: it comes
// back within the fp16 rounding of its scale.
TEST(QuantizeIQ4, ConstantBlocks) {
  for (DType dtype : {DType::kIQ4_NL, DType::kIQ4_XS}) {
    std::vector<float> constant(256, -1.27f);
    auto y = RoundTrip(dtype, constant);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], -1.27f, 2e-3f) << DTypeName(dtype) << " " << i;
  }
}

TEST(QuantizeKQuants, SearchBeatsRoundToNearestAtEqualSize) {
  auto x = Gaussian(256 * 64, 11);
  EXPECT_LT(RelativeRmsError(x, RoundTrip(DType::kQ4_K, x)), 0.9 * RelativeRmsError(x, RoundTrip(DType::kQ4_0, x)));
  EXPECT_LT(RelativeRmsError(x, RoundTrip(DType::kQ5_K, x)), 0.9 * RelativeRmsError(x, RoundTrip(DType::kQ5_0, x)));
}

// Skewed data (all positive, an outlier per block) stays within bounds and
// keeps the outlier close: the affine formats place their min, the
// symmetric ones their extreme.
TEST(QuantizeKQuants, OutliersAndOneSidedBlocks) {
  auto x = Gaussian(256 * 16, 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::fabs(x[i]) + (i % 97 == 0 ? 8.0f : 0.0f);
  for (DType dtype : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_1, DType::kQ5_1}) {
    auto y = RoundTrip(dtype, x);
    EXPECT_LT(RelativeRmsError(x, y), 0.12) << DTypeName(dtype);
    for (size_t i = 0; i < x.size(); i += 97) EXPECT_NEAR(y[i], x[i], 0.1 * x[i]) << DTypeName(dtype) << " " << i;
  }
}

TEST_P(QuantizeFormats, RefusesPartialBlocks) {
  const DType dtype = GetParam().dtype;
  const int block = DTypeBlockSize(dtype);
  if (block == 1) GTEST_SKIP() << "plain type";
  std::vector<float> x(static_cast<size_t>(block) + 1, 1.0f);
  std::vector<uint8_t> out(1024);
  EXPECT_EQ(QuantizeRowRef(dtype, x.data(), out.data(), block + 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeRowRef(dtype, x.data(), out.data(), -block).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(All, QuantizeFormats,
                         ::testing::Values(FormatBound{DType::kF32, 1e-12}, FormatBound{DType::kF16, 1e-3},
                                           FormatBound{DType::kBF16, 5e-3}, FormatBound{DType::kQ8_0, 0.007},
                                           FormatBound{DType::kQ4_0, 0.1}, FormatBound{DType::kQ4_1, 0.095},
                                           FormatBound{DType::kQ5_0, 0.05}, FormatBound{DType::kQ5_1, 0.045},
                                           FormatBound{DType::kQ4_K, 0.085}, FormatBound{DType::kQ5_K, 0.043},
                                           FormatBound{DType::kQ6_K, 0.022}, FormatBound{DType::kIQ4_NL, 0.09},
                                           FormatBound{DType::kIQ4_XS, 0.09}),
                         [](const ::testing::TestParamInfo<FormatBound>& info) {
                           return std::string(DTypeName(info.param.dtype));
                         });

}  // namespace quantize_formats_tests
}  // namespace kiln
