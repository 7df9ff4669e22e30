// The linear kernel: packing, bit-exact agreement with an fp32 FMA chain per
// output, and independence from batch size, batch composition and threads.
#include "backend/cpu/kernels/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace linear_tests {

using testing::AllIsas;
using testing::BitEqual;
using testing::ContextFor;
using testing::RandomFloats;

// A weight matrix in one dtype: the stored bytes and their float values.
struct Weight {
  DType dtype;
  int64_t n, k;
  std::vector<float> f32;      // as stored when dtype is F32
  std::vector<uint16_t> half;  // as stored when F16 / BF16
  std::vector<float> values;   // what the stored elements mean

  const void* data() const {
    return dtype == DType::kF32 ? static_cast<const void*>(f32.data()) : half.data();
  }
};

Weight MakeWeight(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  Weight w{dtype, n, k, {}, {}, RandomFloats(static_cast<size_t>(n * k), seed, -0.5f, 0.5f)};
  if (dtype == DType::kF32) {
    w.f32 = w.values;
  } else {
    w.half = dtype == DType::kBF16 ? testing::ToBf16(w.values) : testing::ToF16(w.values);
    for (size_t i = 0; i < w.half.size(); ++i) {
      w.values[i] = dtype == DType::kBF16 ? Bf16ToF32(w.half[i]) : F16ToF32(w.half[i]);
    }
  }
  return w;
}

// The definition: y[m, n] = fma chain over k from 0, then + bias[n].
std::vector<float> NaiveLinear(const std::vector<float>& x, int64_t ldx, int64_t rows, const Weight& w,
                               const float* bias, int64_t ldy) {
  std::vector<float> y(static_cast<size_t>(rows * ldy), 0.0f);
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < w.n; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < w.k; ++k) {
        acc = std::fma(x[static_cast<size_t>(m * ldx + k)], w.values[static_cast<size_t>(n * w.k + k)], acc);
      }
      y[static_cast<size_t>(m * ldy + n)] = bias != nullptr ? acc + bias[n] : acc;
    }
  }
  return y;
}

PackedWeight Pack(const Weight& w) {
  auto packed = PackLinearWeight(w.dtype, w.data(), w.n, w.k);
  EXPECT_TRUE(packed.ok()) << packed.status().ToString();
  return std::move(packed).value();
}

TEST(PackedWeight, HoldsEveryElementWhereOffsetSays) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {17, 3}, {16, 16}, {33, 65}}) {
      Weight w = MakeWeight(dtype, n, k, 7);
      PackedWeight packed = Pack(w);
      EXPECT_EQ(packed.dtype(), dtype);
      EXPECT_EQ(packed.rows(), n);
      EXPECT_EQ(packed.cols(), k);
      EXPECT_EQ(packed.panels(), (n + 15) / 16);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.data()) % 64, 0u);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) ASSERT_EQ(packed.At(r, c), w.values[static_cast<size_t>(r * k + c)]);
      }
      // Padding rows of the last panel are zero.
      const size_t element = dtype == DType::kF32 ? 4 : 2;
      const auto* bytes = static_cast<const uint8_t*>(packed.data());
      for (int64_t r = n; r < packed.panels() * 16; ++r) {
        for (int64_t c = 0; c < k; ++c) {
          const size_t at = static_cast<size_t>(PackedWeight::Offset(dtype, r, c, k)) * element;
          for (size_t b = 0; b < element; ++b) ASSERT_EQ(bytes[at + b], 0);
        }
      }
    }
  }
}

TEST(PackedWeight, Bf16InterleavesHalvesOfEachPanelRow) {
  EXPECT_EQ(PackedWeight::Offset(DType::kBF16, 0, 0, 5), 0);
  EXPECT_EQ(PackedWeight::Offset(DType::kBF16, 8, 0, 5), 1);
  EXPECT_EQ(PackedWeight::Offset(DType::kBF16, 3, 0, 5), 6);
  EXPECT_EQ(PackedWeight::Offset(DType::kBF16, 11, 0, 5), 7);
  EXPECT_EQ(PackedWeight::Offset(DType::kBF16, 16 + 1, 2, 5), (5 + 2) * 16 + 2);
  EXPECT_EQ(PackedWeight::Offset(DType::kF16, 11, 1, 5), 16 + 11);
}

TEST(PackedWeight, RejectsOtherDtypesAndEmptyShapes) {
  float w[4] = {};
  auto q = PackLinearWeight(DType::kQ4_0, w, 2, 2);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(PackLinearWeight(DType::kF32, w, 0, 2).ok());
  EXPECT_FALSE(PackLinearWeight(DType::kF32, w, 2, -1).ok());
  EXPECT_FALSE(PackLinearWeight(DType::kF32, w, int64_t{1} << 40, int64_t{1} << 30).ok());
}

TEST(PackedWeight, PackingOnThreadsGivesTheSameBytesAndPlacesEveryElement) {
  // Large enough that the pool splits it; N not a multiple of the panel.
  const int64_t n = 16 * 40 + 5, k = 700;
  std::vector<uint16_t> bits(static_cast<size_t>(n * k));
  std::vector<float> f32(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    f32[i] = static_cast<float>(i % 1013) * 0.5f - 200.0f;
    bits[i] = F32ToBf16(f32[i]);
  }
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> f16(bits.size());
    for (size_t i = 0; i < f16.size(); ++i) f16[i] = F32ToF16(f32[i]);
    const void* src = dtype == DType::kF32   ? static_cast<const void*>(f32.data())
                      : dtype == DType::kF16 ? static_cast<const void*>(f16.data())
                                             : static_cast<const void*>(bits.data());
    auto serial = PackLinearWeight(dtype, src, n, k);
    auto threaded = PackLinearWeight(dtype, src, n, k, &DefaultThreadPool(2));
    ASSERT_TRUE(serial.ok() && threaded.ok());
    ASSERT_EQ(serial->bytes(), threaded->bytes());
    EXPECT_EQ(std::memcmp(serial->data(), threaded->data(), serial->bytes()), 0) << DTypeName(dtype);
    for (int64_t row : {int64_t{0}, int64_t{17}, n - 1}) {
      for (int64_t col : {int64_t{0}, int64_t{333}, k - 1}) {
        const float want = dtype == DType::kBF16  ? Bf16ToF32(bits[static_cast<size_t>(row * k + col)])
                           : dtype == DType::kF16 ? F16ToF32(f16[static_cast<size_t>(row * k + col)])
                                                  : f32[static_cast<size_t>(row * k + col)];
        EXPECT_EQ(threaded->At(row, col), want) << DTypeName(dtype) << " " << row << "," << col;
      }
    }
  }
}

class LinearTest : public ::testing::TestWithParam<Isa> {};

// Runs Linear on rows x K inputs at the given strides; y starts as a
// sentinel so that writes outside the N columns show.
std::vector<float> RunLinear(const KernelContext& ctx, const std::vector<float>& x, int64_t ldx, int64_t rows,
                             const PackedWeight& w, const float* bias, int64_t ldy) {
  std::vector<float> y(static_cast<size_t>(rows * ldy), -7.0f);
  Linear(ctx, rows, x.data(), ldx, w, bias, y.data(), ldy);
  return y;
}

void ExpectMatchesNaive(Isa isa, DType dtype, int64_t rows, int64_t n, int64_t k, bool with_bias,
                        int64_t pad_x, int64_t pad_y, int threads) {
  Weight w = MakeWeight(dtype, n, k, static_cast<uint32_t>(n * 131 + k));
  PackedWeight packed = Pack(w);
  const int64_t ldx = k + pad_x, ldy = n + pad_y;
  std::vector<float> x = RandomFloats(static_cast<size_t>(rows * ldx), static_cast<uint32_t>(rows + k));
  std::vector<float> bias = RandomFloats(static_cast<size_t>(n), 99);
  const float* b = with_bias ? bias.data() : nullptr;
  std::vector<float> want = NaiveLinear(x, ldx, rows, w, b, ldy);
  std::vector<float> got = RunLinear(ContextFor(isa, threads), x, ldx, rows, packed, b, ldy);
  for (int64_t m = 0; m < rows; ++m) {
    ASSERT_TRUE(BitEqual(&got[static_cast<size_t>(m * ldy)], &want[static_cast<size_t>(m * ldy)],
                         static_cast<size_t>(n)))
        << DTypeName(dtype) << " rows=" << rows << " n=" << n << " k=" << k << " row " << m;
    for (int64_t c = n; c < ldy; ++c)
      ASSERT_EQ(got[static_cast<size_t>(m * ldy + c)], -7.0f) << "padding written";
  }
}

TEST_P(LinearTest, EveryRowCountMatchesTheFmaChainBitForBit) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t rows = 1; rows <= 37; ++rows)
      ExpectMatchesNaive(GetParam(), dtype, rows, 37, 67, true, 0, 0, 1);
  }
}

TEST_P(LinearTest, AwkwardShapesAndStridesMatchBitForBit) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  struct Shape {
    int64_t n, k;
  };
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Shape s :
         {Shape{1, 1}, Shape{3, 5}, Shape{16, 16}, Shape{17, 33}, Shape{127, 300}, Shape{200, 513}}) {
      for (int64_t rows : {1, 2, 5, 16, 17, 40}) {
        ExpectMatchesNaive(GetParam(), dtype, rows, s.n, s.k, rows % 2 == 0, 3, 5, 2);
      }
    }
  }
}

TEST_P(LinearTest, LargeBatchWithKBlockingMatchesBitForBit) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (DType dtype : {DType::kF32, DType::kBF16})
    ExpectMatchesNaive(GetParam(), dtype, 100, 150, 777, true, 1, 0, 2);
}

// A row's output is the same alone, in any batch, at any position in it, on
// any thread count.
TEST_P(LinearTest, RowResultIndependentOfBatchAndThreads) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const Isa isa = GetParam();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const int64_t n = 301, k = 333, rows = 70;
    Weight w = MakeWeight(dtype, n, k, 5);
    PackedWeight packed = Pack(w);
    std::vector<float> x = RandomFloats(static_cast<size_t>(rows * k), 11);
    std::vector<float> bias = RandomFloats(static_cast<size_t>(n), 12);
    const std::vector<float> full = RunLinear(ContextFor(isa, 1), x, k, rows, packed, bias.data(), n);
    const std::vector<float> full2 = RunLinear(ContextFor(isa, 2), x, k, rows, packed, bias.data(), n);
    ASSERT_TRUE(BitEqual(full.data(), full2.data(), full.size())) << "1 vs 2 threads";
    for (int64_t start : {0, 3, 17, 50}) {
      for (int64_t count : {1, 2, 7, 16, 20}) {
        if (start + count > rows) continue;
        std::vector<float> part(x.begin() + start * k, x.begin() + (start + count) * k);
        for (int threads : {1, 2}) {
          std::vector<float> y = RunLinear(ContextFor(isa, threads), part, k, count, packed, bias.data(), n);
          ASSERT_TRUE(BitEqual(y.data(), &full[static_cast<size_t>(start * n)], y.size()))
              << DTypeName(dtype) << " rows " << start << ".." << start + count << " threads " << threads;
        }
      }
    }
  }
}

TEST_P(LinearTest, Bf16InputEqualsConvertedF32Input) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const int64_t n = 45, k = 70, rows = 19, ldx = 80;
  Weight w = MakeWeight(DType::kBF16, n, k, 3);
  PackedWeight packed = Pack(w);
  std::vector<float> x = RandomFloats(static_cast<size_t>(rows * ldx), 4);
  std::vector<uint16_t> x16 = testing::ToBf16(x);
  std::vector<float> x_rounded(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_rounded[i] = Bf16ToF32(x16[i]);
  const KernelContext ctx = ContextFor(GetParam(), 2);
  std::vector<float> want = RunLinear(ctx, x_rounded, ldx, rows, packed, nullptr, n);
  std::vector<float> got(want.size());
  LinearBf16Input(ctx, rows, x16.data(), ldx, packed, nullptr, got.data(), n);
  EXPECT_TRUE(BitEqual(got.data(), want.data(), got.size()));
}

INSTANTIATE_TEST_SUITE_P(Isas, LinearTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

}  // namespace linear_tests
}  // namespace kiln::cpu
