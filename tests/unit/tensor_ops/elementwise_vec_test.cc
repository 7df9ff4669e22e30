// The vector tables of the f32 fast paths (every ISA this CPU runs)
// against the scalar reference table: activations, binary operand
// patterns, softmax rows and layer-norm rows, on lengths that end in
// partial vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_vec.h"

namespace kiln::cpu {
namespace elementwise_vec_tests {

std::vector<float> Random(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<Isa> VectorIsas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (IsaAvailable(isa)) isas.push_back(isa);
  }
  return isas;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float rel, float abs) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], abs + rel * std::fabs(want[i])) << "element " << i;
  }
}

TEST(TensorVec, TablesReportTheirIsa) {
  EXPECT_EQ(TensorVecFor(Isa::kScalar).isa, Isa::kScalar);
  for (Isa isa : VectorIsas()) EXPECT_EQ(TensorVecFor(isa).isa, isa);
  EXPECT_TRUE(IsaAvailable(TensorVec().isa));
}

TEST(TensorVec, UnaryMatchesReference) {
  const TensorVecTable& ref = TensorVecFor(Isa::kScalar);
  struct Case {
    VecUnaryOp op;
    float alpha, beta;
    float rel, abs;
  };
  const std::vector<Case> cases = {
      {VecUnaryOp::kRelu, 0, 0, 0, 0},
      {VecUnaryOp::kLeakyRelu, 0.1f, 0, 0, 0},
      {VecUnaryOp::kHardSigmoid, 0.2f, 0.5f, 1e-6f, 1e-7f},
      {VecUnaryOp::kHardSwish, 0, 0, 1e-6f, 1e-7f},
      {VecUnaryOp::kSigmoid, 0, 0, 4e-7f, 1e-7f},
      {VecUnaryOp::kSilu, 0, 0, 4e-7f, 1e-7f},
      {VecUnaryOp::kTanh, 0, 0, 4e-7f, 1e-7f},
      {VecUnaryOp::kExp, 0, 0, 4e-7f, 0},
      {VecUnaryOp::kErf, 0, 0, 4e-7f, 1e-7f},
      {VecUnaryOp::kGelu, 0, 0, 1e-6f, 1e-7f},
      {VecUnaryOp::kGeluTanh, 0, 0, 1e-6f, 1e-7f},
  };
  for (Isa isa : VectorIsas()) {
    const TensorVecTable& vec = TensorVecFor(isa);
    for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 100}) {
      const std::vector<float> x = Random(n, static_cast<uint32_t>(n), -12.0f, 12.0f);
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " op " + std::to_string(static_cast<int>(c.op)) + " n " +
                     std::to_string(n));
        std::vector<float> want(n), got(n, -77.0f);
        ref.unary(c.op, c.alpha, c.beta, x.data(), want.data(), n);
        vec.unary(c.op, c.alpha, c.beta, x.data(), got.data(), n);
        ExpectClose(got, want, c.rel, c.abs);
      }
    }
  }
}

TEST(TensorVec, UnaryExtremesMatchReference) {
  const TensorVecTable& ref = TensorVecFor(Isa::kScalar);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf,
                                -100.0f,
                                -88.5f,
                                -20.0f,
                                -1e-30f,
                                -0.0f,
                                0.0f,
                                1e-30f,
                                20.0f,
                                88.5f,
                                100.0f,
                                inf,
                                std::numeric_limits<float>::quiet_NaN()};
  const int64_t n = static_cast<int64_t>(x.size());
  for (Isa isa : VectorIsas()) {
    for (VecUnaryOp op : {VecUnaryOp::kRelu, VecUnaryOp::kSigmoid, VecUnaryOp::kTanh, VecUnaryOp::kExp,
                          VecUnaryOp::kErf, VecUnaryOp::kHardSigmoid}) {
      std::vector<float> want(n), got(n);
      ref.unary(op, 0.2f, 0.5f, x.data(), want.data(), n);
      TensorVecFor(isa).unary(op, 0.2f, 0.5f, x.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " op " + std::to_string(static_cast<int>(op)) + " x " +
                     std::to_string(x[i]));
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i]));
        } else if (std::isinf(want[i])) {
          EXPECT_EQ(got[i], want[i]);
        } else {
          EXPECT_NEAR(got[i], want[i], 1e-37f + 1e-6f * std::fabs(want[i]));
        }
      }
    }
  }
}

TEST(TensorVec, BinaryOperandPatternsMatchReference) {
  const TensorVecTable& ref = TensorVecFor(Isa::kScalar);
  for (Isa isa : VectorIsas()) {
    const TensorVecTable& vec = TensorVecFor(isa);
    for (int64_t n : {1, 9, 16, 37}) {
      const std::vector<float> a = Random(n, 1, -3.0f, 3.0f);
      const std::vector<float> b = Random(n, 2, 0.5f, 3.0f);
      for (VecBinaryOp op : {VecBinaryOp::kAdd, VecBinaryOp::kSub, VecBinaryOp::kMul, VecBinaryOp::kDiv}) {
        for (int pattern = 0; pattern < 4; ++pattern) {
          const int64_t sa = pattern & 1 ? 0 : 1;
          const int64_t sb = pattern & 2 ? 0 : 1;
          std::vector<float> want(n), got(n);
          ref.binary(op, a.data(), sa, b.data(), sb, want.data(), n);
          vec.binary(op, a.data(), sa, b.data(), sb, got.data(), n);
          EXPECT_EQ(got, want) << IsaName(isa) << " op " << static_cast<int>(op) << " pattern " << pattern;
        }
      }
    }
  }
}

TEST(TensorVec, SoftmaxRowsMatchReference) {
  const TensorVecTable& ref = TensorVecFor(Isa::kScalar);
  for (Isa isa : VectorIsas()) {
    const TensorVecTable& vec = TensorVecFor(isa);
    for (int64_t cols : {1, 5, 16, 31, 197}) {
      const int64_t rows = 3;
      std::vector<float> x = Random(rows * cols, 3, -20.0f, 20.0f);
      x[0] = 1e4f;  // a large value: the shift must keep it finite
      for (bool log : {false, true}) {
        std::vector<float> want(rows * cols), got(rows * cols);
        ref.softmax_rows(x.data(), want.data(), rows, cols, log);
        vec.softmax_rows(x.data(), got.data(), rows, cols, log);
        SCOPED_TRACE(std::string(IsaName(isa)) + " cols " + std::to_string(cols) + (log ? " log" : ""));
        ExpectClose(got, want, 2e-6f, log ? 2e-5f : 1e-7f);
      }
    }
  }
}

TEST(TensorVec, LayerNormRowsMatchReference) {
  const TensorVecTable& ref = TensorVecFor(Isa::kScalar);
  for (Isa isa : VectorIsas()) {
    const TensorVecTable& vec = TensorVecFor(isa);
    for (int64_t cols : {1, 7, 32, 45, 384}) {
      const int64_t rows = 4;
      const std::vector<float> x = Random(rows * cols, 5, -4.0f, 6.0f);
      const std::vector<float> scale = Random(cols, 6, 0.5f, 1.5f);
      const std::vector<float> bias = Random(cols, 7, -1.0f, 1.0f);
      for (bool with_bias : {false, true}) {
        std::vector<float> want(rows * cols), got(rows * cols), mean_w(rows), mean_g(rows), inv_w(rows),
            inv_g(rows);
        const float* b = with_bias ? bias.data() : nullptr;
        ref.layer_norm_rows(x.data(), scale.data(), b, want.data(), rows, cols, 1e-5f, mean_w.data(),
                            inv_w.data());
        vec.layer_norm_rows(x.data(), scale.data(), b, got.data(), rows, cols, 1e-5f, mean_g.data(),
                            inv_g.data());
        SCOPED_TRACE(std::string(IsaName(isa)) + " cols " + std::to_string(cols));
        ExpectClose(got, want, 1e-5f, 2e-5f);
        ExpectClose(mean_g, mean_w, 1e-5f, 1e-6f);
        ExpectClose(inv_g, inv_w, 1e-4f, 0);
      }
    }
  }
}

}  // namespace elementwise_vec_tests
}  // namespace kiln::cpu
