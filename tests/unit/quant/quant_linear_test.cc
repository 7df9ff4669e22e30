// The quantized linear layer: every ISA and thread count gives the scalar
// reference's bits; a row's result does not depend on the rows computed with
// it; outputs land in column slices with bias; bad weights are refused.
#include "backend/cpu/qkernels/quant_linear.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace quant_linear_tests {

// Random blocks with small random f16 scales in every f16 field (for the
// linear layer the exact bytes matter less than in block_dot_test).
std::vector<uint8_t> RandomMatrix(DType t, int64_t n, int64_t k, uint32_t seed) {
  const DTypeInfo& info = GetDTypeInfo(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * k / info.block_size * info.block_bytes));
  std::mt19937 rng(seed);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  // Scales live at known places; make every 16-bit word that could be one
  // finite by clearing the exponent's top bit of every odd byte (harmless
  // for the quant bits, which are random anyway).
  for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0xBF;
  return bytes;
}

std::vector<float> RandomRows(int64_t rows, int64_t ld, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * ld));
  for (float& v : x) v = dist(rng);
  return x;
}

struct Case {
  DType dtype;
  int64_t n, k;
};

std::vector<float> RunLinear(const KernelContext& ctx, const QuantMatrix& w, const std::vector<float>& x, int64_t rows,
                       int64_t ldx, const float* bias, int64_t ldy, int64_t col0) {
  std::vector<float> y(static_cast<size_t>(rows * ldy), 3.0f);
  QuantizedRows xq = QuantizeActivations(ctx, rows, x.data(), false, ldx, w.cols(), w.activation_block());
  QuantLinear(ctx, rows, xq, w, bias, y.data() + col0, ldy);
  return y;
}

class QuantLinearTest : public ::testing::TestWithParam<Case> {};

TEST_P(QuantLinearTest, EveryIsaAndThreadCountGivesTheReferenceBits) {
  const Case c = GetParam();
  auto bytes = RandomMatrix(c.dtype, c.n, c.k, 11);
  auto w = MakeQuantMatrix(c.dtype, bytes.data(), bytes.size(), c.n, c.k);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const int64_t ldx = c.k + 3, ldy = c.n + 5, col0 = 2;
  std::vector<float> bias(static_cast<size_t>(c.n));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i);
  for (int64_t rows : {1, 2, 3, 5, 16, 17, 40}) {
    auto x = RandomRows(rows, ldx, static_cast<uint32_t>(rows));
    KernelContext ref;
    ref.isa = Isa::kScalar;
    const auto expected = RunLinear(ref, *w, x, rows, ldx, bias.data(), ldy, col0);
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
      if (!IsaAvailable(isa)) continue;
      for (int threads : {1, 2, 3}) {
        KernelContext ctx;
        ctx.isa = isa;
        ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
        const auto got = RunLinear(ctx, *w, x, rows, ldx, bias.data(), ldy, col0);
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
            << DTypeName(c.dtype) << " " << IsaName(isa) << " threads " << threads << " rows " << rows;
      }
    }
    // Columns outside the slice are untouched.
    for (int64_t m = 0; m < rows; ++m) {
      EXPECT_EQ(expected[static_cast<size_t>(m * ldy)], 3.0f);
      EXPECT_EQ(expected[static_cast<size_t>(m * ldy + col0 + c.n)], 3.0f);
    }
  }
}

TEST_P(QuantLinearTest, ARowsResultIsTheSameAloneAndInABatch) {
  const Case c = GetParam();
  auto bytes = RandomMatrix(c.dtype, c.n, c.k, 5);
  auto w = MakeQuantMatrix(c.dtype, bytes.data(), bytes.size(), c.n, c.k);
  ASSERT_TRUE(w.ok());
  const int64_t rows = 37;
  auto x = RandomRows(rows, c.k, 9);
  KernelContext ctx;
  ctx.pool = &DefaultThreadPool(2);
  const auto together = RunLinear(ctx, *w, x, rows, c.k, nullptr, c.n, 0);
  for (int64_t m : {int64_t{0}, int64_t{13}, rows - 1}) {
    std::vector<float> row(x.begin() + m * c.k, x.begin() + (m + 1) * c.k);
    const auto alone = RunLinear(ctx, *w, row, 1, c.k, nullptr, c.n, 0);
    EXPECT_EQ(std::memcmp(alone.data(), together.data() + m * c.n, static_cast<size_t>(c.n) * sizeof(float)), 0)
        << DTypeName(c.dtype) << " row " << m;
  }
}

TEST_P(QuantLinearTest, Bf16InputIsTheSameAsItsFloatValues) {
  const Case c = GetParam();
  auto bytes = RandomMatrix(c.dtype, c.n, c.k, 8);
  auto w = MakeQuantMatrix(c.dtype, bytes.data(), bytes.size(), c.n, c.k);
  ASSERT_TRUE(w.ok());
  const int64_t rows = 6;
  auto x = RandomRows(rows, c.k, 2);
  std::vector<uint16_t> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x16[i] = F32ToBf16(x[i]);
    x[i] = Bf16ToF32(x16[i]);
  }
  KernelContext ctx;
  const auto from_float = RunLinear(ctx, *w, x, rows, c.k, nullptr, c.n, 0);
  std::vector<float> y(static_cast<size_t>(rows * c.n));
  QuantizedRows xq = QuantizeActivations(ctx, rows, x16.data(), true, c.k, c.k, w->activation_block());
  QuantLinear(ctx, rows, xq, *w, nullptr, y.data(), c.n);
  EXPECT_EQ(std::memcmp(y.data(), from_float.data(), y.size() * sizeof(float)), 0);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(DTypeName(info.param.dtype)) + "_" + std::to_string(info.param.n) + "x" +
         std::to_string(info.param.k);
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantLinearTest,
                         ::testing::Values(Case{DType::kQ8_0, 37, 96}, Case{DType::kQ4_0, 64, 128},
                                           Case{DType::kQ4_1, 19, 64}, Case{DType::kQ5_0, 70, 160},
                                           Case{DType::kQ5_1, 9, 32}, Case{DType::kQ2_K, 21, 512},
                                           Case{DType::kQ3_K, 16, 256}, Case{DType::kQ4_K, 45, 512},
                                           Case{DType::kQ5_K, 8, 768}, Case{DType::kQ6_K, 33, 256},
                                           Case{DType::kIQ4_NL, 27, 96}, Case{DType::kIQ4_XS, 17, 512},
                                           Case{DType::kIQ2_XXS, 9, 256}, Case{DType::kIQ2_XS, 10, 512},
                                           Case{DType::kIQ2_S, 8, 256}, Case{DType::kIQ3_XXS, 11, 256},
                                           Case{DType::kIQ3_S, 12, 512},
                                           // The grid i-quants again with odd N: partial row groups.
                                           Case{DType::kIQ2_XXS, 23, 768}, Case{DType::kIQ3_XXS, 7, 512},
                                           Case{DType::kIQ2_XS, 13, 256}, Case{DType::kIQ3_S, 19, 256},
                                           Case{DType::kIQ2_S, 29, 512}),
                         CaseName);

TEST(QuantMatrix, RefusesWhatTheKernelsCannotRead) {
  std::vector<uint8_t> bytes(4096);
  EXPECT_FALSE(MakeQuantMatrix(DType::kF32, bytes.data(), 64, 4, 4).ok());
  EXPECT_FALSE(MakeQuantMatrix(DType::kQ8_K, bytes.data(), 292, 1, 256).ok());
  EXPECT_FALSE(MakeQuantMatrix(DType::kQ4_0, bytes.data(), 18, 0, 32).ok());
  // K not a whole number of blocks (a 1-D row split across rows).
  auto split = MakeQuantMatrix(DType::kQ4_K, bytes.data(), 144, 2, 128);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("256"), std::string::npos) << split.status().ToString();
  // Byte count other than the shape's.
  auto short_data = MakeQuantMatrix(DType::kQ4_0, bytes.data(), 35, 2, 32);
  ASSERT_FALSE(short_data.ok());
  EXPECT_EQ(short_data.status().code(), StatusCode::kCorrupt);
  auto ok = MakeQuantMatrix(DType::kQ6_K, bytes.data(), 2 * 210, 2, 256);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->row_bytes(), 210);
  EXPECT_EQ(ok->activation_block(), 256);
  EXPECT_EQ(MakeQuantMatrix(DType::kQ5_1, bytes.data(), 24, 1, 32)->activation_block(), 32);
}

}  // namespace quant_linear_tests
}  // namespace kiln::cpu
