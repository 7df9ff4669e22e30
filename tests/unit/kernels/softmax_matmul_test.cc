// Softmax (plain and masked) and the batched matmuls of decomposed
// attention, against double-precision definitions and fp32 FMA chains.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kernels/softmax.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace softmax_matmul_tests {

using testing::AllIsas;
using testing::BitEqual;
using testing::ContextFor;
using testing::RandomFloats;

class SoftmaxTest : public ::testing::TestWithParam<Isa> {};

// The tolerance for a softmax output: a few ulps, plus the rounding of the
// fp32 exponent scale * x - max, which e^ turns into |scale * x - max| ulps.
double SoftmaxTolerance(double want, float x, float scale, const float* row, int64_t begin, int64_t end) {
  if (begin >= end) return 0.0;  // an empty row: exact zeros
  double m = -INFINITY;
  for (int64_t c = begin; c < end; ++c) m = std::max(m, static_cast<double>(scale * row[c]));
  return (8 + 2 * std::fabs(scale * x - m)) * 6e-8 * want + 1e-40;
}

// Softmax of scale * x over [begin, end) in double; zeros elsewhere.
std::vector<double> SoftmaxDefinition(const float* x, int64_t cols, float scale, int64_t begin, int64_t end) {
  std::vector<double> y(static_cast<size_t>(cols), 0.0);
  double m = -INFINITY, sum = 0;
  for (int64_t c = begin; c < end; ++c) m = std::max(m, static_cast<double>(scale * x[c]));
  for (int64_t c = begin; c < end; ++c) sum += std::exp(static_cast<double>(scale * x[c]) - m);
  for (int64_t c = begin; c < end; ++c)
    y[static_cast<size_t>(c)] = std::exp(static_cast<double>(scale * x[c]) - m) / sum;
  return y;
}

TEST_P(SoftmaxTest, RowsMatchTheDefinition) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int64_t cols : {1, 3, 17, 33, 127, 512, 1000}) {
    const int64_t rows = 4, ld = cols + 3;
    std::vector<float> x = RandomFloats(static_cast<size_t>(rows * ld), 1, -20.0f, 20.0f);
    std::vector<float> out(static_cast<size_t>(rows * ld), 5.0f);
    Softmax(ContextFor(GetParam(), 2), rows, cols, x.data(), ld, 0.5f, out.data(), ld);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> want = SoftmaxDefinition(&x[static_cast<size_t>(r * ld)], cols, 0.5f, 0, cols);
      for (int64_t c = 0; c < cols; ++c) {
        const float* row = &x[static_cast<size_t>(r * ld)];
        ASSERT_NEAR(out[static_cast<size_t>(r * ld + c)], want[static_cast<size_t>(c)],
                    SoftmaxTolerance(want[static_cast<size_t>(c)], row[c], 0.5f, row, 0, cols))
            << "cols " << cols << " row " << r << " col " << c;
      }
      ASSERT_EQ(out[static_cast<size_t>(r * ld + cols)], 5.0f);
    }
  }
}

TEST_P(SoftmaxTest, MaskedRowsUseOnlyTheirRangeAndZeroTheRest) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const int64_t rows = 6, cols = 37;
  std::vector<float> x = RandomFloats(static_cast<size_t>(rows * cols), 2, -5.0f, 5.0f);
  const std::vector<int32_t> begin = {0, 0, 5, 10, 36, 20};
  const std::vector<int32_t> end = {1, 37, 30, 10, 37, 9};  // row 3 and 5: empty
  std::vector<float> out(x.size(), 3.0f);
  MaskedSoftmax(ContextFor(GetParam(), 1), rows, cols, x.data(), cols, 1.0f, begin.data(), end.data(),
                out.data(), cols);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> want = SoftmaxDefinition(&x[static_cast<size_t>(r * cols)], cols, 1.0f, begin[r],
                                                 std::max(begin[r], end[r]));
    for (int64_t c = 0; c < cols; ++c) {
      const float* row = &x[static_cast<size_t>(r * cols)];
      ASSERT_NEAR(out[static_cast<size_t>(r * cols + c)], want[static_cast<size_t>(c)],
                  SoftmaxTolerance(want[static_cast<size_t>(c)], row[c], 1.0f, row, begin[r], end[r]))
          << "row " << r << " col " << c;
    }
  }
}

TEST_P(SoftmaxTest, InPlaceAndAllMinusInfinity) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  std::vector<float> x = RandomFloats(50, 3);
  std::vector<float> expected(50);
  Softmax(ContextFor(GetParam(), 1), 1, 50, x.data(), 50, 1.0f, expected.data(), 50);
  Softmax(ContextFor(GetParam(), 1), 1, 50, x.data(), 50, 1.0f, x.data(), 50);
  EXPECT_TRUE(BitEqual(x.data(), expected.data(), 50));
  std::vector<float> masked(20, -std::numeric_limits<float>::infinity());
  Softmax(ContextFor(GetParam(), 1), 1, 20, masked.data(), 20, 1.0f, masked.data(), 20);
  for (float v : masked) EXPECT_EQ(v, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Isas, SoftmaxTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

class MatMulTest : public ::testing::TestWithParam<Isa> {};

TEST_P(MatMulTest, ProductsMatchTheirDefinitions) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s :
       {Shape{1, 1, 1}, Shape{3, 17, 5}, Shape{7, 33, 64}, Shape{16, 100, 17}, Shape{5, 127, 128}}) {
    const int64_t batch = 6, group = 3;  // 6 query heads over 2 KV heads
    const int64_t lda = batch * s.k + 1, ldc = batch * s.n + 2;
    // B as [k][n] per KV head, and as [n][k] for the transposed product.
    const int64_t ldb_nn = (batch / group) * s.n + 3, ldb_nt = (batch / group) * s.k + 4;
    std::vector<float> a = RandomFloats(static_cast<size_t>(s.m * lda), 5);
    std::vector<float> b_nn = RandomFloats(static_cast<size_t>(s.k * ldb_nn), 6);
    std::vector<float> b_nt = RandomFloats(static_cast<size_t>(s.n * ldb_nt), 7);
    std::vector<float> c_nn(static_cast<size_t>(s.m * ldc), 8.0f), c_nt = c_nn;
    const KernelContext ctx = ContextFor(GetParam(), 2);
    MatMul(ctx, batch, s.m, s.n, s.k, {a.data(), lda, s.k}, {b_nn.data(), ldb_nn, s.n}, false,
           {c_nn.data(), ldc, s.n}, group);
    MatMul(ctx, batch, s.m, s.n, s.k, {a.data(), lda, s.k}, {b_nt.data(), ldb_nt, s.k}, true,
           {c_nt.data(), ldc, s.n}, group);
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t j = i / group;
      for (int64_t m = 0; m < s.m; ++m) {
        for (int64_t n = 0; n < s.n; ++n) {
          float chain = 0.0f;
          double dot = 0;
          for (int64_t k = 0; k < s.k; ++k) {
            const float av = a[static_cast<size_t>(m * lda + i * s.k + k)];
            chain = std::fma(av, b_nn[static_cast<size_t>(k * ldb_nn + j * s.n + n)], chain);
            dot += static_cast<double>(av) * b_nt[static_cast<size_t>(n * ldb_nt + j * s.k + k)];
          }
          const size_t at = static_cast<size_t>(m * ldc + i * s.n + n);
          ASSERT_EQ(c_nn[at], chain) << "A*B batch " << i << " (" << m << ", " << n << ")";
          ASSERT_NEAR(c_nt[at], dot, 1e-6 * std::sqrt(static_cast<double>(s.k)) + 1e-6 * std::fabs(dot))
              << "A*B^T batch " << i << " (" << m << ", " << n << ")";
        }
      }
    }
    EXPECT_EQ(c_nn.back(), 8.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, MatMulTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

}  // namespace softmax_matmul_tests
}  // namespace kiln::cpu
