// RMSNorm, per-head RMSNorm and the fused residual add: against a double
// precision definition, and per-row results independent of batch and threads.
#include "backend/cpu/kernels/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"

namespace kiln::cpu {
namespace rms_norm_tests {

using testing::AllIsas;
using testing::BitEqual;
using testing::ContextFor;
using testing::RandomFloats;

// weight * x / sqrt(mean(x^2) + eps) in double.
std::vector<double> Definition(const float* x, const float* w, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum / static_cast<double>(n) + eps);
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = w[i] * (x[i] * inv);
  return y;
}

void ExpectClose(const float* got, const std::vector<double>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-30) << what << " element " << i;
  }
}

class RmsNormTest : public ::testing::TestWithParam<Isa> {};

TEST_P(RmsNormTest, RowsMatchTheDefinition) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int64_t dim : {1, 3, 8, 17, 33, 127, 896, 1000}) {
    const int64_t rows = 5, ldx = dim + 3, ldy = dim + 1;
    std::vector<float> x = RandomFloats(static_cast<size_t>(rows * ldx), 1, -3.0f, 3.0f);
    std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 2, 0.5f, 1.5f);
    std::vector<float> y(static_cast<size_t>(rows * ldy), 42.0f);
    RmsNorm(ContextFor(GetParam(), 2), rows, dim, x.data(), ldx, w.data(), 1e-6f, y.data(), ldy);
    for (int64_t r = 0; r < rows; ++r) {
      ExpectClose(&y[static_cast<size_t>(r * ldy)],
                  Definition(&x[static_cast<size_t>(r * ldx)], w.data(), dim, 1e-6f), "rmsnorm");
      ASSERT_EQ(y[static_cast<size_t>(r * ldy + dim)], 42.0f) << "wrote past the row";
    }
  }
}

TEST_P(RmsNormTest, InPlace) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const int64_t dim = 64;
  std::vector<float> x = RandomFloats(static_cast<size_t>(3 * dim), 3);
  std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 4);
  std::vector<float> expected(x.size());
  const KernelContext ctx = ContextFor(GetParam(), 1);
  RmsNorm(ctx, 3, dim, x.data(), dim, w.data(), 1e-5f, expected.data(), dim);
  RmsNorm(ctx, 3, dim, x.data(), dim, w.data(), 1e-5f, x.data(), dim);
  EXPECT_TRUE(BitEqual(x.data(), expected.data(), x.size()));
}

TEST_P(RmsNormTest, PerHeadNormalizesEachHeadOfAStridedRow) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const int64_t tokens = 4, heads = 3, head_dim = 24, ld = heads * head_dim + 40;  // inside a fused QKV row
  std::vector<float> x = RandomFloats(static_cast<size_t>(tokens * ld), 5, -2.0f, 2.0f);
  std::vector<float> w = RandomFloats(static_cast<size_t>(head_dim), 6, 0.5f, 1.5f);
  std::vector<float> y = x;
  RmsNormHeads(ContextFor(GetParam(), 2), tokens, heads, head_dim, y.data(), ld, w.data(), 1e-6f, y.data(),
               ld);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const size_t at = static_cast<size_t>(t * ld + h * head_dim);
      ExpectClose(&y[at], Definition(&x[at], w.data(), head_dim, 1e-6f), "head");
    }
    for (int64_t c = heads * head_dim; c < ld; ++c) {
      ASSERT_EQ(y[static_cast<size_t>(t * ld + c)], x[static_cast<size_t>(t * ld + c)])
          << "touched beyond heads";
    }
  }
}

TEST_P(RmsNormTest, AddRmsNormUpdatesResidualAndNormalizesTheSum) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int64_t dim : {7, 64, 333}) {
    const int64_t rows = 6;
    std::vector<float> x = RandomFloats(static_cast<size_t>(rows * dim), 7);
    std::vector<float> residual = RandomFloats(static_cast<size_t>(rows * dim), 8);
    std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 9, 0.5f, 1.5f);
    std::vector<float> sum(x.size());
    for (size_t i = 0; i < x.size(); ++i) sum[i] = residual[i] + x[i];
    std::vector<float> y(x.size());
    AddRmsNorm(ContextFor(GetParam(), 2), rows, dim, x.data(), dim, residual.data(), dim, w.data(), 1e-6f,
               y.data(), dim);
    EXPECT_TRUE(BitEqual(residual.data(), sum.data(), sum.size()));
    for (int64_t r = 0; r < rows; ++r) {
      ExpectClose(&y[static_cast<size_t>(r * dim)],
                  Definition(&sum[static_cast<size_t>(r * dim)], w.data(), dim, 1e-6f), "add+rmsnorm");
    }
  }
}

// The binders' form: the residual read from one buffer, the sum written to
// another, the same bits as the in-place add.
TEST_P(RmsNormTest, AddRmsNormIntoAnotherBufferMatchesTheInPlaceAdd) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int64_t dim : {7, 64, 896}) {
    const int64_t rows = 40, ld_x = dim + 3, ld_res = dim + 5, ld_sum = dim + 1, ld_y = dim + 2;
    const std::vector<float> x = RandomFloats(static_cast<size_t>(rows * ld_x), 12);
    const std::vector<float> residual = RandomFloats(static_cast<size_t>(rows * ld_res), 13);
    const std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 14, 0.5f, 1.5f);
    std::vector<float> in_place = residual, want_y(static_cast<size_t>(rows * ld_y), -7.0f);
    AddRmsNorm(ContextFor(GetParam(), 1), rows, dim, x.data(), ld_x, in_place.data(), ld_res, w.data(), 1e-6f,
               want_y.data(), ld_y);
    std::vector<float> input = residual, sum(static_cast<size_t>(rows * ld_sum), -9.0f),
                       y(static_cast<size_t>(rows * ld_y), -7.0f);
    AddRmsNorm(ContextFor(GetParam(), 2), rows, dim, x.data(), ld_x, input.data(), ld_res, sum.data(), ld_sum,
               w.data(), 1e-6f, y.data(), ld_y);
    EXPECT_TRUE(BitEqual(input.data(), residual.data(), residual.size())) << "residual written";
    EXPECT_TRUE(BitEqual(y.data(), want_y.data(), y.size())) << "dim " << dim;
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(BitEqual(&sum[static_cast<size_t>(r * ld_sum)], &in_place[static_cast<size_t>(r * ld_res)],
                           static_cast<size_t>(dim)))
          << "dim " << dim << " row " << r;
      EXPECT_EQ(sum[static_cast<size_t>(r * ld_sum + dim)], -9.0f) << "written beyond the row";
    }
  }
}

TEST_P(RmsNormTest, RowResultIndependentOfBatchAndThreads) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const int64_t dim = 896, rows = 40;
  std::vector<float> x = RandomFloats(static_cast<size_t>(rows * dim), 10);
  std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 11);
  std::vector<float> full(x.size());
  RmsNorm(ContextFor(GetParam(), 1), rows, dim, x.data(), dim, w.data(), 1e-6f, full.data(), dim);
  std::vector<float> threaded(x.size());
  RmsNorm(ContextFor(GetParam(), 2), rows, dim, x.data(), dim, w.data(), 1e-6f, threaded.data(), dim);
  EXPECT_TRUE(BitEqual(full.data(), threaded.data(), x.size()));
  for (int64_t r : {0, 13, 39}) {
    std::vector<float> one(static_cast<size_t>(dim));
    RmsNorm(ContextFor(GetParam(), 2), 1, dim, &x[static_cast<size_t>(r * dim)], dim, w.data(), 1e-6f,
            one.data(), dim);
    EXPECT_TRUE(BitEqual(one.data(), &full[static_cast<size_t>(r * dim)], static_cast<size_t>(dim)))
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, RmsNormTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

}  // namespace rms_norm_tests
}  // namespace kiln::cpu
