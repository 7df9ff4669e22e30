// The quantized linear layer: every ISA and thread count gives the scalar
// reference's bits; a row's result does not depend on the rows computed with
// it; outputs land in column slices with bias; bad weights are refused.
#include "backend/cpu/qkernels/quant_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
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

// Every byte QuantizeActivations writes for rows x k (values, scales, piece
// sums, and the block-by-block and AMX tile layouts where made), copied out
// of the thread scratch it lives in.
// With `layouts` false, the values, scales and sums only (every ISA's).
std::vector<uint8_t> QuantizedBytes(const QuantizedRows& q, int64_t rows, bool layouts) {
  std::vector<uint8_t> out;
  auto put = [&](const void* p, int64_t bytes) {
    if (p == nullptr) return;
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + bytes);
  };
  const int64_t k = q.k, blocks = k / q.block;
  put(q.q, rows * k);
  put(q.d, rows * blocks * 4);
  put(q.sums, rows * (k / 16) * 2);
  if (!layouts) return out;
  if (q.by_block != nullptr && q.by_block != q.q) {
    const int64_t padded = (rows + q.by_block_rows - 1) / q.by_block_rows * q.by_block_rows;
    put(q.by_block, padded * k);
    put(q.by_block_d, padded * (k / 32) * 4);
  }
  if (q.by_block_neg_sum != nullptr) {
    const int64_t padded = (rows + q.by_block_rows - 1) / q.by_block_rows * q.by_block_rows;
    put(q.by_block_neg_sum, padded * (k / 32) * 4);
  }
  const int64_t tile_rows = (rows + 15) / 16 * 16;
  put(q.tile_d, tile_rows * blocks * 4);
  put(q.tile_s, tile_rows * (k / 32) * 4);
  put(q.tile_pairs, tile_rows * blocks * 4 * 4);
  return out;
}

// The activations' quantization, shared by threads in row tiles and, for few
// rows, runs of blocks: the same bytes in every layout whatever the split
// (rows that fill no tile, rows in several tiles, blocks in runs that do
// not divide K), and on every ISA the scalar reference's.
TEST(QuantizeActivations, EveryThreadCountWritesTheSameBytes) {
  for (int block : {32, 256}) {
    for (int64_t k : {int64_t{256} * 19, int64_t{256} * 37, int64_t{1024}}) {
      for (int64_t rows : {1, 2, 5, 16, 17, 40}) {
        auto x = RandomRows(rows, k, static_cast<uint32_t>(rows * 7 + k));
        x[static_cast<size_t>(k / 2)] = 0.0f;
        // NaNs count as nothing in their block's scale: one, and a whole vector's.
        x[static_cast<size_t>(k / 2 + 1)] = std::numeric_limits<float>::quiet_NaN();
        std::fill_n(x.begin() + k / 2 + 48, 16, std::numeric_limits<float>::quiet_NaN());
        // The results live in the calling thread's scratch: other values
        // there first, so that a block left unwritten shows.
        const auto other = RandomRows(rows, k, 1);
        auto quantize = [&](const KernelContext& ctx, bool layouts) {
          KernelContext whole = ctx;  // one thread: every byte of the layout
          whole.pool = nullptr;
          (void)QuantizeActivations(whole, rows, other.data(), false, k, k, block);
          return QuantizedBytes(QuantizeActivations(ctx, rows, x.data(), false, k, k, block), rows, layouts);
        };
        KernelContext ref;
        ref.isa = Isa::kScalar;
        const auto expected = quantize(ref, false);
        for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
          if (!IsaAvailable(isa)) continue;
          KernelContext one;
          one.isa = isa;
          const auto alone = quantize(one, true);
          ASSERT_GE(alone.size(), expected.size());
          EXPECT_EQ(std::memcmp(alone.data(), expected.data(), expected.size()), 0)
              << IsaName(isa) << " rows " << rows << " k " << k << " block " << block;
          for (int threads : {2, 3}) {
            KernelContext ctx = one;
            ctx.pool = &DefaultThreadPool(threads);
            const auto got = quantize(ctx, true);
            EXPECT_TRUE(got == alone) << IsaName(isa) << " threads " << threads << " rows " << rows << " k "
                                      << k << " block " << block;
          }
        }
      }
    }
  }
}

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
