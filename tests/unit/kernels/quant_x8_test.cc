// The x8 layout of Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS and the
// k-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K: the repacked copy moves every block's bytes where
// quant_matrix.h says, and the kernels reading it (alone: the rows are not
// read again, for any row count) give the reference's bits (which reads the
// GGUF rows) for every ISA, thread count, batch and row count that is not a
// multiple of the group.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/kernels/amx.h"
#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/qkernels/quant_linear.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "quant/ggml_blocks.h"

namespace kiln::cpu {
namespace quant_x8_tests {

// Random bytes with every 16-bit word a finite f16 where a scale may sit;
// Q8_0 values include -128, which the format allows.
std::vector<uint8_t> RandomBlocks(DType t, int64_t n, int64_t k, uint32_t seed) {
  const uint64_t bytes = DTypeBytes(t, static_cast<uint64_t>(n * k)).value();
  std::vector<uint8_t> out(bytes);
  std::mt19937 rng(seed);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  for (size_t i = 1; i < out.size(); i += 2) out[i] &= 0xBF;
  return out;
}

std::vector<float> RunLinear(const KernelContext& ctx, const QuantMatrix& w, const std::vector<float>& x,
                             int64_t rows, const std::vector<float>& bias) {
  std::vector<float> y(static_cast<size_t>(rows * w.rows()), -1.0f);
  const QuantizedRows xq =
      QuantizeActivations(ctx, rows, x.data(), false, w.cols(), w.cols(), w.activation_block());
  QuantLinear(ctx, rows, xq, w, bias.data(), y.data(), w.rows());
  return y;
}

// f(ctx) for every ISA this CPU runs, on 1, 2 and 3 threads.
template <class F>
void ForEachIsaAndThreadCount(F f) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaAvailable(isa)) continue;
    for (int threads : {1, 2, 3}) {
      KernelContext ctx;
      ctx.isa = isa;
      ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
      f(ctx);
    }
  }
}

struct Shape {
  DType dtype;
  int64_t n, k;
};

bool IsSuperBlock(DType t) { return DTypeBlockSize(t) == 256; }

// The 32-value formats: d (and Q4_1's and Q5_1's m after the 16 rows' d)
// to the scales area, the values in 4-byte pieces (Q5_x's fifth bits last).
void ExpectBlocksWhereTheLayoutSays(const Shape& s, const std::vector<uint8_t>& bytes, const QuantMatrix& x8) {
  const int64_t blocks = s.k / kQK, pairs = (s.n + 15) / 16;
  const int64_t pair_bytes = X8PairBytes(s.dtype, s.k);
  const bool q8 = s.dtype == DType::kQ8_0;
  const bool q5 = s.dtype == DType::kQ5_0 || s.dtype == DType::kQ5_1;
  const bool has_m = s.dtype == DType::kQ4_1 || s.dtype == DType::kQ5_1;
  const int64_t block_bytes = GetDTypeInfo(s.dtype).block_bytes;
  const int64_t row_bytes = block_bytes * blocks;
  const int lines = q8 ? 8 : 4;  // 4-byte pieces of a row's block, one per tile line
  const int64_t scales = has_m ? 4 : 2;  // d (and m)
  const int64_t values = scales + (q5 ? 4 : 0);  // after them, Q5_x's 4 bytes of fifth bits
  const int64_t stride = has_m ? 64 : 32;
  for (int64_t n = 0; n < pairs * 16; ++n) {
    const uint8_t* pair = x8.x8() + (n / 16) * pair_bytes;
    const int j = static_cast<int>(n % 16);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* scale = pair + b * stride + 2 * j;
      const uint8_t* piece = pair + X8ScaleBytes(s.dtype, blocks) + b * X8TileBytes(s.dtype) + 4 * j;
      if (n >= s.n) {
        // Rows past N are zeros.
        EXPECT_EQ(scale[0] | scale[1], 0);
        if (has_m) {
          EXPECT_EQ(scale[32] | scale[33], 0);
        }
        for (int l = 0; l < lines + (q5 ? 1 : 0); ++l) {
          for (int i = 0; i < 4; ++i) ASSERT_EQ(piece[64 * l + i], 0);
        }
        continue;
      }
      const uint8_t* block = bytes.data() + n * row_bytes + b * block_bytes;
      ASSERT_EQ(std::memcmp(scale, block, 2), 0) << "row " << n << " block " << b;
      if (has_m) {
        ASSERT_EQ(std::memcmp(scale + 32, block + 2, 2), 0) << "row " << n << " m " << b;
      }
      for (int l = 0; l < lines; ++l) {
        ASSERT_EQ(std::memcmp(piece + 64 * l, block + values + 4 * l, 4), 0) << "row " << n << " block " << b;
      }
      if (q5) {
        ASSERT_EQ(std::memcmp(piece + 64 * lines, block + scales, 4), 0)
            << "row " << n << " fifth bits " << b;
      }
    }
  }
}

// A Q6_K block's 256 6-bit values, in ggml's dequantization order.
std::vector<int> Q6_KValues(const uint8_t* block) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  std::vector<int> y(256);
  for (int n = 0; n < 2; ++n, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      y[128 * n + l] = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
      y[128 * n + l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
      y[128 * n + l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
      y[128 * n + l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
    }
  }
  return y;
}

// Q6_K's tile (row j's bytes at piece + 64 l): every value where
// quant_matrix.h says, and the scales as in the file.
void ExpectQ6_KTile(const uint8_t* block, const uint8_t* piece, int64_t n, int64_t b) {
  const std::vector<int> y = Q6_KValues(block);
  for (int h = 0; h < 2; ++h) {
    for (int g = 0; g < 8; ++g) {
      for (int p = 0; p < 4; ++p) {
        const int e = 128 * h + 4 * g + p;
        int fourth = 0;
        for (int t = 0; t < 3; ++t) {
          const uint8_t byte = piece[64 * (3 * (8 * h + g) + t) + p];
          ASSERT_EQ(byte & 0x3F, y[e + 32 * t]) << "row " << n << " block " << b << " value " << e + 32 * t;
          fourth |= (byte >> 6) << (2 * t);
        }
        ASSERT_EQ(fourth, y[e + 96]) << "row " << n << " block " << b << " value " << e + 96;
      }
    }
  }
  for (int l = 0; l < 4; ++l) {
    ASSERT_EQ(std::memcmp(piece + 64 * (48 + l), block + 192 + 4 * l, 4), 0) << "row " << n << " scales " << b;
  }
}

// A Q3_K block's 256 3-bit values (2 bits and the high bit; 4 is
// subtracted later), in ggml's dequantization order.
std::vector<int> Q3_KValues(const uint8_t* block) {
  const uint8_t* hmask = block;
  const uint8_t* qs = block + 32;
  std::vector<int> y(256);
  for (int h = 0; h < 2; ++h) {
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        y[128 * h + 32 * g + l] = ((qs[32 * h + l] >> (2 * g)) & 3) | (((hmask[l] >> (4 * h + g)) & 1) << 2);
      }
    }
  }
  return y;
}

// Q3_K's tile (row j's bytes at piece + 64 l): every value where
// quant_matrix.h says, and the scales as in the file.
void ExpectQ3_KTile(const uint8_t* block, const uint8_t* piece, int64_t n, int64_t b) {
  const std::vector<int> y = Q3_KValues(block);
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      for (int p = 0; p < 4; ++p) {
        uint8_t line[3];
        for (int t = 0; t < 3; ++t) line[t] = piece[64 * (3 * (4 * h + i) + t) + p];
        auto v = [&](int g, int j) { return y[128 * h + 32 * g + 4 * j + p]; };
        for (int t = 0; t < 3; ++t) {
          ASSERT_EQ(line[t] & 7, v(t, 2 * i)) << "row " << n << " block " << b;
          ASSERT_EQ((line[t] >> 3) & 7, v(t, 2 * i + 1)) << "row " << n << " block " << b;
        }
        ASSERT_EQ((line[0] >> 6) | (((line[1] >> 6) & 1) << 2), v(3, 2 * i)) << "row " << n << " block " << b;
        ASSERT_EQ((line[1] >> 7) | ((line[2] >> 6) << 1), v(3, 2 * i + 1)) << "row " << n << " block " << b;
      }
    }
  }
  for (int l = 0; l < 3; ++l) {
    ASSERT_EQ(std::memcmp(piece + 64 * (24 + l), block + 96 + 4 * l, 4), 0) << "row " << n << " scales " << b;
  }
}

// The k-quants: d (and dmin) to the scales area, the rest of the block in
// 4-byte pieces in the file's order (Q6_K's and Q3_K's values rearranged); so every
// bit of the rows is somewhere.
void ExpectSuperBlocksWhereTheLayoutSays(const Shape& s, const std::vector<uint8_t>& bytes, const QuantMatrix& x8) {
  const int64_t blocks = s.k / kQK_K, pairs = (s.n + 15) / 16;
  const int64_t pair_bytes = X8PairBytes(s.dtype, s.k);
  const int64_t block_bytes = GetDTypeInfo(s.dtype).block_bytes;
  const int64_t row_bytes = block_bytes * blocks;
  const bool q6 = s.dtype == DType::kQ6_K;
  // Where d (and dmin, or IQ4_XS's high scale bits) sit: first in Q4_K,
  // Q5_K and IQ4_XS, last in the others.
  const bool first = s.dtype == DType::kQ4_K || s.dtype == DType::kQ5_K || s.dtype == DType::kIQ4_XS;
  const bool has_min = first || s.dtype == DType::kQ2_K;
  const int64_t scale_bytes = has_min ? 4 : 2;
  const int64_t d_at = first ? 0 : block_bytes - scale_bytes, body = first ? 4 : 0;
  const int64_t stride = has_min ? 64 : 32;
  const int64_t lines = (block_bytes - scale_bytes) / 4;
  EXPECT_EQ(X8TileBytes(s.dtype), 64 * lines);
  EXPECT_LE(pair_bytes, 16 * row_bytes + 63);  // no bytes added but the scales area's rounding
  for (int64_t n = 0; n < pairs * 16; ++n) {
    const uint8_t* pair = x8.x8() + (n / 16) * pair_bytes;
    const int j = static_cast<int>(n % 16);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* scale = pair + b * stride + 2 * j;
      const uint8_t* piece = pair + X8ScaleBytes(s.dtype, blocks) + b * X8TileBytes(s.dtype) + 4 * j;
      const std::vector<uint8_t> zeros(static_cast<size_t>(block_bytes), 0);
      const uint8_t* block = n < s.n ? bytes.data() + n * row_bytes + b * block_bytes : zeros.data();
      ASSERT_EQ(std::memcmp(scale, block + d_at, 2), 0) << "row " << n << " block " << b;
      if (has_min) {
        ASSERT_EQ(std::memcmp(scale + 32, block + d_at + 2, 2), 0) << "row " << n << " dmin " << b;
      }
      if (q6) {
        ExpectQ6_KTile(block, piece, n, b);
        continue;
      }
      if (s.dtype == DType::kQ3_K) {
        ExpectQ3_KTile(block, piece, n, b);
        continue;
      }
      for (int64_t l = 0; l < lines; ++l) {
        ASSERT_EQ(std::memcmp(piece + 64 * l, block + body + 4 * l, 4), 0) << "row " << n << " block " << b;
      }
    }
  }
}

class QuantX8Test : public ::testing::TestWithParam<Shape> {};

TEST_P(QuantX8Test, RepackMovesEveryBlockWhereTheLayoutSays) {
  const Shape s = GetParam();
  const auto bytes = RandomBlocks(s.dtype, s.n, s.k, 3);
  auto rows = MakeQuantMatrix(s.dtype, bytes.data(), bytes.size(), s.n, s.k);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->x8(), nullptr);
  EXPECT_EQ(rows->layout(), std::string(DTypeName(s.dtype)) + "-rows");
  auto x8 = RepackX8(*rows);
  ASSERT_TRUE(x8.ok()) << x8.status().ToString();
  ASSERT_NE(x8->x8(), nullptr);
  EXPECT_EQ(x8->layout(), std::string(DTypeName(s.dtype)) + "-x8");
  const int64_t pairs = (s.n + 15) / 16;
  const int64_t pair_bytes = X8PairBytes(s.dtype, s.k);
  EXPECT_EQ(pair_bytes % 64, 0);
  EXPECT_EQ(x8->kernel_bytes(), static_cast<size_t>(pairs * pair_bytes));
  EXPECT_TRUE(X8ServesEveryRowCount(s.dtype));
  if (IsSuperBlock(s.dtype)) {
    ExpectSuperBlocksWhereTheLayoutSays(s, bytes, *x8);
  } else {
    ExpectBlocksWhereTheLayoutSays(s, bytes, *x8);
  }
  // Repacking twice, or a type without the layout, changes nothing.
  EXPECT_EQ(RepackX8(*x8)->x8(), x8->x8());
  std::vector<uint8_t> xs(static_cast<size_t>(DTypeBytes(DType::kIQ2_XXS, 256).value()));
  auto other = MakeQuantMatrix(DType::kIQ2_XXS, xs.data(), xs.size(), 1, 256);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(RepackX8(*other)->x8(), nullptr);
}

TEST_P(QuantX8Test, KernelsOnTheCopyGiveTheReferenceBits) {
  const Shape s = GetParam();
  const auto bytes = RandomBlocks(s.dtype, s.n, s.k, 7);
  auto rows = MakeQuantMatrix(s.dtype, bytes.data(), bytes.size(), s.n, s.k);
  ASSERT_TRUE(rows.ok());
  auto x8 = RepackX8(*rows);
  ASSERT_TRUE(x8.ok());
  std::vector<float> bias(static_cast<size_t>(s.n));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.25f * static_cast<float>(i % 7);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17, 31, 32, 33, 37, 70}) {
    std::vector<float> x(static_cast<size_t>(m * s.k));
    for (float& v : x) v = dist(rng);
    KernelContext ref;
    ref.isa = Isa::kScalar;
    const auto expected = RunLinear(ref, *rows, x, m, bias);
    ForEachIsaAndThreadCount([&](const KernelContext& ctx) {
      const auto got = RunLinear(ctx, *x8, x, m, bias);
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
          << DTypeName(s.dtype) << " " << IsaName(ctx.isa) << " (" << QuantLinearKernel(ctx, m, *x8)
          << ") threads " << ctx.num_threads() << " rows " << m;
    });
    // A row computed alone gives the bits it gets in the batch.
    KernelContext ctx;
    const std::vector<float> last(x.end() - s.k, x.end());
    const auto alone = RunLinear(ctx, *x8, last, 1, bias);
    EXPECT_EQ(std::memcmp(alone.data(), expected.data() + (m - 1) * s.n, alone.size() * sizeof(float)), 0);
  }
}

// Every row count (decoding, a few rows, prefill) reads the copy alone on
// the vector ISAs, with the bits of the same ISA's row kernel on the file's
// blocks and of the reference: the file's bytes overwritten after the
// repack change nothing, and neither do the threads (whatever tiles of
// rows share each unpacked vector: 512-bit pairs of groups with VNNI, tiles
// of one group on 256 bits, or the one-row kernel row by row).
TEST_P(QuantX8Test, EveryRowCountReadsTheCopyAlone) {
  const Shape s = GetParam();
  auto bytes = RandomBlocks(s.dtype, s.n, s.k, 11);
  auto rows = MakeQuantMatrix(s.dtype, bytes.data(), bytes.size(), s.n, s.k);
  ASSERT_TRUE(rows.ok());
  auto x8 = RepackX8(*rows);
  ASSERT_TRUE(x8.ok());
  const std::vector<float> bias(static_cast<size_t>(s.n), 0.5f);
  std::mt19937 rng(6);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t m : {1, 2, 5, 16, 64, 100}) {
    std::vector<float> x(static_cast<size_t>(m * s.k));
    for (float& v : x) v = dist(rng);
    KernelContext ref;
    ref.isa = Isa::kScalar;
    const auto expected = RunLinear(ref, *rows, x, m, bias);
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
      if (!IsaAvailable(isa)) continue;
      KernelContext ctx;
      ctx.isa = isa;
      const auto row_kernel = RunLinear(ctx, *rows, x, m, bias);
      ASSERT_EQ(std::memcmp(row_kernel.data(), expected.data(), expected.size() * sizeof(float)), 0)
          << DTypeName(s.dtype) << " " << IsaName(isa) << " rows " << m;
      const std::vector<uint8_t> saved = bytes;
      std::fill(bytes.begin(), bytes.end(), uint8_t{0x11});
      for (int threads : {1, 3}) {
        ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
        const auto got = RunLinear(ctx, *x8, x, m, bias);
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), expected.size() * sizeof(float)), 0)
            << DTypeName(s.dtype) << " " << IsaName(isa) << " rows " << m << " threads " << threads;
      }
      bytes = saved;
    }
  }
}

// The AVX2 level runs the 256-bit VNNI GEMM where the CPU has AVX-VNNI,
// unless KILN_ISA=avx2 asks for plain AVX2 (the kernel tests run again
// under KILN_ISA=avx2 and avx-vnni, so that both tables meet the reference
// on a CPU with both).
TEST(QuantX8, Avx2LevelTakesAvxVnniWhereTheCpuHasIt) {
  if (!IsaAvailable(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 here (or KILN_ISA=scalar)";
  const auto bytes = RandomBlocks(DType::kQ4_0, 16, 64, 3);
  auto x8 = RepackX8(*MakeQuantMatrix(DType::kQ4_0, bytes.data(), bytes.size(), 16, 64));
  ASSERT_TRUE(x8.ok());
  KernelContext ctx;
  ctx.isa = Isa::kAvx2;
  EXPECT_STREQ(QuantLinearKernel(ctx, 5, *x8), GetCpuInfo().avx_vnni ? "avx-vnni" : "avx2");
  const char* forced = std::getenv("KILN_ISA");
  if (forced != nullptr && std::string(forced) == "avx2") {
    EXPECT_FALSE(GetCpuInfo().avx_vnni);
  }
}

// Where the CPU has AMX-INT8, many rows of the x8 formats the tiles take run on them
// (so the tests above check the AMX kernel against the reference there);
// decoding rows, other formats and the GGUF rows stay on the vector kernels.
TEST(QuantX8, ManyRowsRunOnAmxTilesWhereTheCpuHasThem) {
  if (!IsaAvailable(Isa::kAvx512) || !AmxInt8Usable()) {
    GTEST_SKIP() << "no AMX-INT8 here (or KILN_AMX=0): the vector kernels run every row count";
  }
  const int64_t n = 16, k = 64;
  const auto bytes = RandomBlocks(DType::kQ8_0, n, k, 3);
  auto rows = MakeQuantMatrix(DType::kQ8_0, bytes.data(), bytes.size(), n, k);
  ASSERT_TRUE(rows.ok());
  auto x8 = RepackX8(*rows);
  ASSERT_TRUE(x8.ok());
  KernelContext ctx;
  ctx.isa = Isa::kAvx512;
  EXPECT_STREQ(QuantLinearKernel(ctx, 16, *x8), "amx-int8");
  EXPECT_STREQ(QuantLinearKernel(ctx, 512, *x8), "amx-int8");
  EXPECT_STRNE(QuantLinearKernel(ctx, 15, *x8), "amx-int8");
  EXPECT_STRNE(QuantLinearKernel(ctx, 16, *rows), "amx-int8");
  ctx.isa = Isa::kAvx2;
  EXPECT_STRNE(QuantLinearKernel(ctx, 16, *x8), "amx-int8");
  // Every x8 format goes to the tiles.
  ctx.isa = Isa::kAvx512;
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kIQ4_NL, DType::kQ4_1, DType::kQ5_1, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS, DType::kQ3_K, DType::kQ2_K}) {
    const int64_t kt = QuantActivationBlock(t) == 256 ? 256 : k;
    const auto tb = RandomBlocks(t, n, kt, 4);
    auto tx8 = RepackX8(*MakeQuantMatrix(t, tb.data(), tb.size(), n, kt));
    ASSERT_TRUE(tx8.ok()) << DTypeName(t);
    EXPECT_STREQ(QuantLinearKernel(ctx, 16, *tx8), "amx-int8") << DTypeName(t);
  }
}

// A fused projection computed as parts in one call gives each part the bits
// of its own QuantLinear call, for few rows (one joint split) and many. The
// first part's 7 row groups make the threads' shares of the second start at
// odd groups, in the middle of the x8 layout's pairs.
TEST(QuantLinearParts, GiveEachPartTheBitsOfItsOwnCall) {
  const int64_t k = 160, nq = 53;
  const auto q_bytes = RandomBlocks(DType::kQ8_0, nq, k, 1);
  const auto k_bytes = RandomBlocks(DType::kQ4_0, 16, k, 2);
  const auto v_bytes = RandomBlocks(DType::kQ5_0, 13, k, 3);
  const QuantMatrix q =
      RepackX8(*MakeQuantMatrix(DType::kQ8_0, q_bytes.data(), q_bytes.size(), nq, k)).value();
  const QuantMatrix kw =
      RepackX8(*MakeQuantMatrix(DType::kQ4_0, k_bytes.data(), k_bytes.size(), 16, k)).value();
  const QuantMatrix v = *MakeQuantMatrix(DType::kQ5_0, v_bytes.data(), v_bytes.size(), 13, k);
  std::vector<float> bias(nq, 0.5f);
  const int64_t ldy = nq + 16 + 13 + 3;
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t rows : {1, 3, 5, 8, 20}) {
    std::vector<float> x(static_cast<size_t>(rows * k));
    for (float& value : x) value = dist(rng);
    for (int threads : {1, 2, 3}) {
      KernelContext ctx;
      ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
      const QuantizedRows xq = QuantizeActivations(ctx, rows, x.data(), false, k, k, 32);
      std::vector<float> separate(static_cast<size_t>(rows * ldy), -1.0f), joint = separate;
      QuantLinear(ctx, rows, xq, q, bias.data(), separate.data(), ldy);
      QuantLinear(ctx, rows, xq, kw, nullptr, separate.data() + nq, ldy);
      QuantLinear(ctx, rows, xq, v, nullptr, separate.data() + nq + 16, ldy);
      const QuantLinearPart parts[3] = {{&q, bias.data(), joint.data()},
                                        {&kw, nullptr, joint.data() + nq},
                                        {&v, nullptr, joint.data() + nq + 16}};
      QuantLinearParts(ctx, rows, xq, parts, 3, ldy);
      EXPECT_EQ(std::memcmp(joint.data(), separate.data(), joint.size() * sizeof(float)), 0)
          << "rows " << rows << " threads " << threads;
    }
  }
}

// A gated MLP's two products chunk by chunk (QuantLinearPairedChunks) give
// what the two QuantLinear calls and SiluMul over their whole outputs give,
// bit for bit: x8 copies (on the tiles where the CPU has them) and a GGUF
// k-quant, widths that end in a part of a chunk and in an odd row group,
// row counts from the first that counts as many, on every ISA and thread
// count; few rows are left to QuantLinearParts.
TEST(QuantLinearPairedChunks, GiveTheBitsOfTwoCallsAndSiluMul) {
  struct Pair {
    DType dtype;
    bool x8;
    int64_t n, k;
  };
  for (const Pair& p : {Pair{DType::kQ8_0, true, 200, 96}, Pair{DType::kQ4_0, true, 136, 160},
                        Pair{DType::kQ5_0, true, 64, 64}, Pair{DType::kQ4_K, false, 72, 256},
                        Pair{DType::kQ6_K, true, 88, 256}}) {
    const auto a_bytes = RandomBlocks(p.dtype, p.n, p.k, 21);
    const auto b_bytes = RandomBlocks(p.dtype, p.n, p.k, 22);
    QuantMatrix a = *MakeQuantMatrix(p.dtype, a_bytes.data(), a_bytes.size(), p.n, p.k);
    QuantMatrix b = *MakeQuantMatrix(p.dtype, b_bytes.data(), b_bytes.size(), p.n, p.k);
    if (p.x8) {
      a = RepackX8(a).value();
      b = RepackX8(b).value();
    }
    std::mt19937 rng(6);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int64_t rows : {3, 16, 37}) {
      std::vector<float> x(static_cast<size_t>(rows * p.k));
      for (float& value : x) value = dist(rng);
      ForEachIsaAndThreadCount([&](const KernelContext& ctx) {
        const QuantizedRows xq =
            QuantizeActivations(ctx, rows, x.data(), false, p.k, p.k, a.activation_block());
        std::vector<float> products(static_cast<size_t>(rows * 2 * p.n));
        QuantLinear(ctx, rows, xq, a, nullptr, products.data(), 2 * p.n);
        QuantLinear(ctx, rows, xq, b, nullptr, products.data() + p.n, 2 * p.n);
        const int64_t ld = p.n + 3;
        std::vector<float> expected(static_cast<size_t>(rows * ld), -1.0f), got = expected;
        SiluMul(ctx, rows, p.n, products.data(), 2 * p.n, products.data() + p.n, 2 * p.n, expected.data(),
                ld);
        std::vector<int> seen(static_cast<size_t>(p.n), 0);
        const bool chunked = QuantLinearPairedChunks(
            ctx, rows, xq, a, b,
            [&](int64_t col_begin, int64_t cols, const float* ga, const float* gb, int64_t lds) {
              for (int64_t c = col_begin; c < col_begin + cols; ++c) ++seen[static_cast<size_t>(c)];
              SiluMulOnThisThread(ctx.isa, rows, cols, ga, lds, gb, lds, got.data() + col_begin, ld);
            });
        const std::string where = std::string(DTypeName(p.dtype)) + " " + IsaName(ctx.isa) + " rows " +
                                  std::to_string(rows) + " threads " + std::to_string(ctx.num_threads());
        if (rows < 16) {
          EXPECT_FALSE(chunked) << where;
          return;
        }
        ASSERT_TRUE(chunked) << where;
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), p.n) << where;
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << where;
      });
    }
  }
}

// Weights applied to activation rows of their own in one call (a mixture's
// chosen experts) give each job the bits of its own QuantLinear call: the
// x8 copies at 1 to 5 rows, a k-quant on its rows, and one job of many rows.
TEST(QuantLinearJobs, GiveEachJobTheBitsOfItsOwnCall) {
  const int64_t k = 256;
  const auto a_bytes = RandomBlocks(DType::kQ4_0, 40, k, 5);
  const auto b_bytes = RandomBlocks(DType::kQ8_0, 24, k, 6);
  const auto c_bytes = RandomBlocks(DType::kQ4_K, 19, k, 7);
  const QuantMatrix a = RepackX8(*MakeQuantMatrix(DType::kQ4_0, a_bytes.data(), a_bytes.size(), 40, k)).value();
  const QuantMatrix b = RepackX8(*MakeQuantMatrix(DType::kQ8_0, b_bytes.data(), b_bytes.size(), 24, k)).value();
  const QuantMatrix c = *MakeQuantMatrix(DType::kQ4_K, c_bytes.data(), c_bytes.size(), 19, k);
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const std::vector<int64_t>& rows : std::vector<std::vector<int64_t>>{{1, 1, 1}, {3, 1, 5}, {2, 17, 1}}) {
    for (int threads : {1, 2, 3}) {
      KernelContext ctx;
      ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
      const QuantMatrix* w[3] = {&a, &b, &c};
      // Each job's rows quantized into buffers of their own (the calls
      // below reuse the thread's activation scratch).
      std::vector<std::vector<int8_t>> q(3);
      std::vector<std::vector<float>> d(3), x(3), separate(3), joint(3);
      std::vector<std::vector<int16_t>> sums(3);
      QuantizedRows xq[3];
      QuantLinearJob jobs[3];
      for (int j = 0; j < 3; ++j) {
        const int block = w[j]->activation_block();
        x[j].resize(static_cast<size_t>(rows[j] * k));
        for (float& value : x[j]) value = dist(rng);
        const QuantizedRows t = QuantizeActivations(ctx, rows[j], x[j].data(), false, k, k, block);
        q[j].assign(t.q, t.q + rows[j] * k);
        d[j].assign(t.d, t.d + rows[j] * (k / block));
        sums[j].assign(t.sums, t.sums + rows[j] * (k / 16));
        xq[j].q = q[j].data();
        xq[j].d = d[j].data();
        xq[j].sums = sums[j].data();
        xq[j].k = k;
        xq[j].block = block;
        xq[j].rows = rows[j];
        separate[j].assign(static_cast<size_t>(rows[j] * w[j]->rows()), -1.0f);
        joint[j] = separate[j];
        QuantLinear(ctx, rows[j], t, *w[j], nullptr, separate[j].data(), w[j]->rows());
        jobs[j] = {w[j], &xq[j], rows[j], joint[j].data(), w[j]->rows()};
      }
      QuantLinearJobs(ctx, jobs, 3);
      for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(std::memcmp(joint[j].data(), separate[j].data(), joint[j].size() * sizeof(float)), 0)
            << "job " << j << " rows " << rows[j] << " threads " << threads;
      }
    }
  }
}

std::string ShapeName(const ::testing::TestParamInfo<Shape>& info) {
  return std::string(DTypeName(info.param.dtype)) + "_" + std::to_string(info.param.n) + "x" +
         std::to_string(info.param.k);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QuantX8Test,
    ::testing::Values(
        Shape{DType::kQ8_0, 8, 32}, Shape{DType::kQ8_0, 37, 96}, Shape{DType::kQ8_0, 130, 288},
        Shape{DType::kQ4_0, 8, 32}, Shape{DType::kQ4_0, 61, 128}, Shape{DType::kQ4_0, 130, 320},
        Shape{DType::kQ8_0, 270, 96}, Shape{DType::kQ4_0, 300, 64}, Shape{DType::kIQ4_NL, 61, 128},
        Shape{DType::kIQ4_NL, 130, 320}, Shape{DType::kQ5_0, 61, 128}, Shape{DType::kQ5_0, 130, 320},
        Shape{DType::kQ5_0, 8, 32}, Shape{DType::kQ4_1, 61, 128}, Shape{DType::kQ4_1, 130, 320},
        Shape{DType::kQ4_1, 8, 32}, Shape{DType::kQ5_1, 61, 128}, Shape{DType::kQ5_1, 130, 320},
        Shape{DType::kQ5_1, 8, 32}, Shape{DType::kQ4_K, 61, 512}, Shape{DType::kQ4_K, 130, 256},
        Shape{DType::kQ5_K, 61, 512}, Shape{DType::kQ5_K, 8, 256}, Shape{DType::kQ6_K, 61, 768},
        Shape{DType::kQ6_K, 130, 256}, Shape{DType::kQ6_K, 8, 256}, Shape{DType::kQ3_K, 61, 768},
        Shape{DType::kQ3_K, 130, 256}, Shape{DType::kQ3_K, 8, 256}, Shape{DType::kQ2_K, 61, 768},
        Shape{DType::kQ2_K, 130, 256}, Shape{DType::kQ2_K, 8, 256},
        // Odd N and K (super-blocks not a power of two).
        Shape{DType::kQ4_K, 37, 1280}, Shape{DType::kQ5_K, 45, 768}, Shape{DType::kQ6_K, 23, 1792},
        Shape{DType::kQ3_K, 19, 1280}, Shape{DType::kQ2_K, 27, 1280}, Shape{DType::kIQ4_NL, 29, 96},
        Shape{DType::kQ5_1, 45, 224}, Shape{DType::kIQ4_XS, 61, 512}, Shape{DType::kIQ4_XS, 130, 256},
        Shape{DType::kIQ4_XS, 8, 256}, Shape{DType::kIQ4_XS, 37, 1280},
        // 101 groups: three threads' cells of 9 split pairs.
        Shape{DType::kQ5_0, 808, 64}, Shape{DType::kIQ4_NL, 808, 64}, Shape{DType::kQ4_0, 808, 64},
        Shape{DType::kQ8_0, 808, 64}, Shape{DType::kQ4_K, 808, 256}, Shape{DType::kQ5_K, 808, 256},
        Shape{DType::kQ6_K, 808, 256}, Shape{DType::kIQ4_XS, 808, 256}, Shape{DType::kQ4_1, 808, 64},
        Shape{DType::kQ5_1, 808, 64},
        // A long K (69 blocks: a row tile's activations span 2 KiB rows),
        // 19 groups: ten strips on the tiles, the last one in part.
        Shape{DType::kQ8_0, 150, 2208}, Shape{DType::kQ4_0, 150, 2208}, Shape{DType::kQ5_0, 150, 2208},
        Shape{DType::kIQ4_NL, 150, 2208}, Shape{DType::kQ4_1, 150, 2208}, Shape{DType::kQ5_1, 150, 2208}),
    ShapeName);

}  // namespace quant_x8_tests
}  // namespace kiln::cpu
