// The quantized kernels' block dot products, per format: every ISA equals
// the scalar reference bit for bit (activation quantization included), and
// the reference equals the dot product of the dequantized weights with the
// dequantized activations, on random blocks and on edge values (all-zero
// blocks, d = 65504, subnormal d, negative zero, large and tiny activations).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/qkernels/qkernel_table.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "core/half.h"
#include "quant/dequantize.h"
#include "quant/ggml_blocks.h"

namespace kiln::cpu {
namespace block_dot_tests {

// Byte offsets of a format's f16 scale fields (d first).
std::vector<size_t> HalfFields(DType t) {
  switch (t) {
    case DType::kQ4_0: return {offsetof(BlockQ4_0, d)};
    case DType::kQ4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::kQ5_0: return {offsetof(BlockQ5_0, d)};
    case DType::kQ5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::kQ8_0: return {offsetof(BlockQ8_0, d)};
    case DType::kQ2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::kQ3_K: return {offsetof(BlockQ3_K, d)};
    case DType::kQ4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::kQ5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::kQ6_K: return {offsetof(BlockQ6_K, d)};
    case DType::kIQ4_NL: return {offsetof(BlockIQ4_NL, d)};
    case DType::kIQ4_XS: return {offsetof(BlockIQ4_XS, d)};
    case DType::kIQ2_XXS: return {offsetof(BlockIQ2_XXS, d)};
    case DType::kIQ2_XS: return {offsetof(BlockIQ2_XS, d)};
    case DType::kIQ2_S: return {offsetof(BlockIQ2_S, d)};
    case DType::kIQ3_XXS: return {offsetof(BlockIQ3_XXS, d)};
    case DType::kIQ3_S: return {offsetof(BlockIQ3_S, d)};
    default: return {};
  }
}

enum class Scales { kRandom, kZeroBlocks, kHuge, kSubnormal, kNegativeZero };

const char* ScalesName(Scales s) {
  switch (s) {
    case Scales::kRandom: return "random";
    case Scales::kZeroBlocks: return "zero blocks";
    case Scales::kHuge: return "d = 65504";
    case Scales::kSubnormal: return "subnormal d";
    case Scales::kNegativeZero: return "d = -0";
  }
  return "?";
}

// n rows of k values of `t`: random bytes, with the f16 scale fields set
// according to `scales` (every third block all zero for kZeroBlocks).
std::vector<uint8_t> RandomWeights(DType t, int64_t n, int64_t k, Scales scales, uint32_t seed) {
  const DTypeInfo& info = GetDTypeInfo(t);
  const int64_t blocks = n * k / info.block_size;
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * info.block_bytes));
  std::mt19937 rng(seed);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* block = bytes.data() + b * info.block_bytes;
    if (scales == Scales::kZeroBlocks && b % 3 == 0) {
      std::memset(block, 0, static_cast<size_t>(info.block_bytes));
      continue;
    }
    for (size_t off : HalfFields(t)) {
      uint16_t h = F32ToF16(scale(rng));
      if (scales == Scales::kHuge) h = off == HalfFields(t)[0] ? 0x7BFF : F32ToF16(scale(rng));  // 65504
      if (scales == Scales::kSubnormal) h = static_cast<uint16_t>(1 + rng() % 0x3FF);
      if (scales == Scales::kNegativeZero) h = 0x8000;
      std::memcpy(block + off, &h, 2);
    }
  }
  return bytes;
}

std::vector<float> RandomActivations(int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * k));
  for (float& v : x) v = dist(rng);
  // Edge rows: all zero, very large, below the normal range, one outlier.
  if (rows > 1) std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);
  if (rows > 2) {
    for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(2 * k + i)] *= 1e30f;
  }
  if (rows > 3) {
    for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(3 * k + i)] *= 1e-39f;
  }
  if (rows > 4) x[static_cast<size_t>(4 * k + 5)] = 1000.0f;
  return x;
}

struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> sums;
  QuantizedRows rows;
};

Quantized QuantizeWith(const QuantKernelTable& kernels, const std::vector<float>& x, int64_t rows, int64_t k,
                       int block) {
  Quantized out;
  out.q.resize(static_cast<size_t>(rows * k));
  out.d.resize(static_cast<size_t>(rows * (k / block)));
  out.sums.resize(static_cast<size_t>(rows * (k / 16)));
  out.rows = QuantizedRows{out.q.data(), out.d.data(), out.sums.data(), k, block};
  QuantizeRowsArgs args{x.data(), false, k, 0, rows, 0, k / block, out.rows};
  kernels.quantize_rows(args);
  return out;
}

std::vector<float> GemmWith(const QuantKernelTable& kernels, DType t, const std::vector<uint8_t>& w, int64_t n,
                            int64_t k, const Quantized& x, int64_t rows, const float* bias) {
  std::vector<float> y(static_cast<size_t>(rows * n), -7.0f);
  QuantGemmArgs args{};
  args.w_type = t;
  args.w = w.data();
  args.row_bytes = static_cast<int64_t>(*DTypeBytes(t, static_cast<uint64_t>(k)));
  args.n_total = n;
  args.k = k;
  args.x = &x.rows;
  args.bias = bias;
  args.y = y.data();
  args.ldy = n;
  args.m_begin = 0;
  args.m_end = rows;
  args.g_begin = 0;
  args.g_end = (n + kQuantGroupRows - 1) / kQuantGroupRows;
  kernels.gemm(args);
  return y;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class BlockDot : public ::testing::TestWithParam<DType> {};

TEST_P(BlockDot, EveryIsaEqualsTheReferenceBitForBit) {
  const DType t = GetParam();
  const int block = QuantActivationBlock(t);
  const int64_t k = 3 * DTypeBlockSize(t);
  const int64_t rows = 7;
  const QuantKernelTable& ref = qref::Table();
  for (Scales scales : {Scales::kRandom, Scales::kZeroBlocks, Scales::kHuge, Scales::kSubnormal,
                        Scales::kNegativeZero}) {
    for (int64_t n : {1, 8, 13, 24}) {
      auto w = RandomWeights(t, n, k, scales, static_cast<uint32_t>(n * 31 + static_cast<int>(scales)));
      auto x = RandomActivations(rows, k, static_cast<uint32_t>(n));
      std::vector<float> bias(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) bias[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i) - 1.0f;
      Quantized xr = QuantizeWith(ref, x, rows, k, block);
      auto yr = GemmWith(ref, t, w, n, k, xr, rows, bias.data());
      for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        if (!IsaAvailable(isa)) continue;
        const QuantKernelTable& vec = QuantKernelsFor(isa);
        SCOPED_TRACE(std::string(vec.name) + " " + ScalesName(scales) + " n=" + std::to_string(n));
        Quantized xv = QuantizeWith(vec, x, rows, k, block);
        EXPECT_EQ(xv.q, xr.q);
        EXPECT_TRUE(BitEqual(xv.d, xr.d));
        EXPECT_EQ(xv.sums, xr.sums);
        EXPECT_TRUE(BitEqual(GemmWith(vec, t, w, n, k, xr, rows, bias.data()), yr));
        EXPECT_TRUE(BitEqual(GemmWith(vec, t, w, n, k, xr, rows, nullptr),
                             GemmWith(ref, t, w, n, k, xr, rows, nullptr)));
      }
    }
  }
}

// The reference against plain dequantization: weights by quant/dequantize.h,
// activations as d * q, the dot product in double. Only the fp32 rounding of
// the per-block products and sums separates them.
TEST_P(BlockDot, ReferenceEqualsDequantizedDotProduct) {
  const DType t = GetParam();
  const int block = QuantActivationBlock(t);
  const int64_t k = 4 * DTypeBlockSize(t);
  const int64_t n = 11, rows = 5;
  for (Scales scales : {Scales::kRandom, Scales::kZeroBlocks, Scales::kSubnormal}) {
    auto w = RandomWeights(t, n, k, scales, 99u + static_cast<uint32_t>(scales));
    std::vector<float> wf(static_cast<size_t>(n * k));
    ASSERT_TRUE(DequantizeRow(t, w.data(), wf.data(), n * k).ok());
    auto x = RandomActivations(rows, k, 5);
    Quantized xq = QuantizeWith(qref::Table(), x, rows, k, block);
    auto y = GemmWith(qref::Table(), t, w, n, k, xq, rows, nullptr);
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double xv = static_cast<double>(xq.d[static_cast<size_t>(m * (k / block) + i / block)]) *
                            xq.q[static_cast<size_t>(m * k + i)];
          exact += static_cast<double>(wf[static_cast<size_t>(j * k + i)]) * xv;
          magnitude += std::fabs(static_cast<double>(wf[static_cast<size_t>(j * k + i)]) * xv);
        }
        const double got = y[static_cast<size_t>(m * n + j)];
        EXPECT_NEAR(got, exact, 1e-5 * magnitude + 1e-30)
            << DTypeName(t) << " " << ScalesName(scales) << " row " << m << " output " << j;
      }
    }
  }
}

// The activation quantizer: scales and rounding as documented, on every ISA.
TEST(QuantizeRows, ScaleIsMaxOver127AndValuesRoundToNearestEven) {
  const int64_t k = 256;
  std::vector<float> x(static_cast<size_t>(2 * k));
  for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 64) - 31.5f;
  x[40] = -254.0f;  // the largest magnitude of the row's second block of 32
  for (int64_t i = k; i < 2 * k; ++i) x[static_cast<size_t>(i)] = 1e-40f;  // below the normal range
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaAvailable(isa)) continue;
    for (int block : {32, 256}) {
      Quantized q = QuantizeWith(QuantKernelsFor(isa), x, 2, k, block);
      const float d = q.d[static_cast<size_t>(40 / block)];
      EXPECT_EQ(d, 254.0f / 127.0f) << IsaName(isa) << " block " << block;
      EXPECT_EQ(q.q[40], -127);
      for (int i : {33, 47, 60}) {
        EXPECT_EQ(q.q[static_cast<size_t>(i)], static_cast<int8_t>(std::nearbyint(x[static_cast<size_t>(i)] * (1.0f / d))));
      }
      // x = 2.5 and 3.5 at scale 1 (the first block of 32) round to even.
      if (block == 32) {
        EXPECT_EQ(q.q[34], static_cast<int8_t>(std::nearbyint(2.5f / d)));
      }
      for (int64_t i = 0; i < k / block; ++i) EXPECT_EQ(q.d[static_cast<size_t>(k / block + i)], 0.0f);
      for (int64_t i = k; i < 2 * k; ++i) EXPECT_EQ(q.q[static_cast<size_t>(i)], 0);
      int32_t sum = 0;
      for (int i = 0; i < 16; ++i) sum += q.q[static_cast<size_t>(i)];
      EXPECT_EQ(q.sums[0], sum);
    }
  }
}

std::string FormatName(const ::testing::TestParamInfo<DType>& info) { return DTypeName(info.param); }

INSTANTIATE_TEST_SUITE_P(Formats, BlockDot, ::testing::ValuesIn(QuantKernelTypes()), FormatName);

}  // namespace block_dot_tests
}  // namespace kiln::cpu
