// The reduce family through RunTensorOp: Reduce* with axes as attribute or
// input (keepdims, noop_with_empty_axes, negative axes, integers),
// ArgMax/ArgMin, the softmax family in both opset forms, CumSum, TopK,
// the normalizations against loops written here, and the errors.
#include <cmath>
#include <limits>
#include <random>

#include "core/thread_pool.h"
#include "elementwise_reduce_test_util.h"
#include "graph/tensor_op.h"

namespace kiln {
namespace reduce_ops_tests {

using test::F32;
using test::I32;
using test::I64;
using test::OpCall;
using test::Run1;
using test::Values;

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// x is [2, 3, 4]: element (i, j, k) = i * 12 + j * 4 + k + 1.
TensorData Cube() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i + 1);
  return F32({2, 3, 4}, v);
}

OpCall Reduce(const char* op, TensorData x, std::vector<int64_t> axes, int64_t keepdims = 1) {
  OpCall c{op, {std::move(x)}};
  c.attrs.SetInts("axes", axes);
  c.attrs.SetInt("keepdims", keepdims);
  c.opset = 13;
  return c;
}

TEST(Reduce, SumOverAxesAsAttributeOrInput) {
  TensorData y = Run1(Reduce("ReduceSum", Cube(), {1}));
  EXPECT_EQ(y.type(), (TensorType{DType::kF32, {2, 1, 4}}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{15, 18, 21, 24, 51, 54, 57, 60}));
  // Opset 13: axes as the second input; negative axes count from the end.
  OpCall input_form{"ReduceSum", {Cube(), I64({2}, {-1, 0})}};
  input_form.attrs.SetInt("keepdims", 0);
  TensorData z = Run1(input_form);
  EXPECT_EQ(z.type(), (TensorType{DType::kF32, {3}}));
  EXPECT_EQ(Values<float>(z), (std::vector<float>{10 + 58, 26 + 74, 42 + 90}));
  // No axes: everything; with noop_with_empty_axes: the identity.
  EXPECT_EQ(Values<float>(Run1({"ReduceSum", {Cube()}})), (std::vector<float>{300}));
  OpCall noop{"ReduceSum", {Cube(), I64({0}, {})}};
  noop.attrs.SetInt("noop_with_empty_axes", 1);
  EXPECT_EQ(Values<float>(Run1(noop)), Values<float>(Cube()));
}

TEST(Reduce, EveryKindAgainstALoop) {
  const std::vector<float> x = Random(2 * 3 * 5, 3, 0.1f, 2.0f);
  struct Kind {
    const char* op;
    double init;
    double (*step)(double acc, double v);
    double (*finish)(double acc, double count);
  };
  const std::vector<Kind> kinds = {
      {"ReduceSum", 0, [](double a, double v) { return a + v; }, [](double a, double) { return a; }},
      {"ReduceMean", 0, [](double a, double v) { return a + v; }, [](double a, double n) { return a / n; }},
      {"ReduceMax", -INFINITY, [](double a, double v) { return std::max(a, v); },
       [](double a, double) { return a; }},
      {"ReduceMin", INFINITY, [](double a, double v) { return std::min(a, v); },
       [](double a, double) { return a; }},
      {"ReduceProd", 1, [](double a, double v) { return a * v; }, [](double a, double) { return a; }},
      {"ReduceL1", 0, [](double a, double v) { return a + std::fabs(v); },
       [](double a, double) { return a; }},
      {"ReduceL2", 0, [](double a, double v) { return a + v * v; },
       [](double a, double) { return std::sqrt(a); }},
      {"ReduceLogSum", 0, [](double a, double v) { return a + v; },
       [](double a, double) { return std::log(a); }},
      {"ReduceLogSumExp", 0, [](double a, double v) { return a + std::exp(v); },
       [](double a, double) { return std::log(a); }},
      {"ReduceSumSquare", 0, [](double a, double v) { return a + v * v; },
       [](double a, double) { return a; }},
  };
  for (const Kind& k : kinds) {
    SCOPED_TRACE(k.op);
    // Over axes {0, 2} of [2, 3, 5]: three results.
    std::vector<double> want;
    for (int j = 0; j < 3; ++j) {
      double acc = k.init;
      for (int i = 0; i < 2; ++i) {
        for (int l = 0; l < 5; ++l) acc = k.step(acc, x[i * 15 + j * 5 + l]);
      }
      want.push_back(k.finish(acc, 10));
    }
    OpCall c = Reduce(k.op, F32({2, 3, 5}, x), {0, -1}, 0);
    c.opset = 17;
    TensorData y = Run1(c);
    EXPECT_EQ(y.type(), (TensorType{DType::kF32, {3}}));
    test::ExpectNear(Values<float>(y), want, 1e-6, 1e-6);
    // Opset 18: axes as an input for all of them.
    OpCall c18{k.op, {F32({2, 3, 5}, x), I64({2}, {0, 2})}};
    c18.attrs.SetInt("keepdims", 0);
    c18.opset = 18;
    test::ExpectNear(Values<float>(Run1(c18)), want, 1e-6, 1e-6);
  }
}

TEST(Reduce, IntegerReductions) {
  TensorData x = I64({2, 3}, {1, -2, 3, 4, 5, -6});
  EXPECT_EQ(Values<int64_t>(Run1(Reduce("ReduceSum", x, {1}, 0))), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int64_t>(Run1(Reduce("ReduceMax", x, {0}, 0))), (std::vector<int64_t>{4, 5, 3}));
  EXPECT_EQ(Values<int64_t>(Run1(Reduce("ReduceProd", x, {0, 1}, 0))), (std::vector<int64_t>{720}));
  EXPECT_EQ(Values<int32_t>(Run1(Reduce("ReduceMin", I32({3}, {4, -1, 2}), {0}))),
            (std::vector<int32_t>{-1}));
}

TEST(Reduce, BadAxesAreErrors) {
  test::ExpectError(Reduce("ReduceSum", Cube(), {3}), "axis 3 is out of range for rank 3");
  test::ExpectError(Reduce("ReduceMean", Cube(), {1, -2}), "given twice");
  OpCall computed{"ReduceSum", {Cube(), I64({1}, {0})}};
  ASSERT_TRUE(test::Run(computed).ok());
}

TEST(ArgReduce, FirstOrLastIndexAlongAnAxis) {
  TensorData x = F32({2, 3}, {1.0f, 5.0f, 5.0f, 7.0f, 2.0f, 7.0f});
  OpCall c{"ArgMax", {x}};
  c.attrs.SetInt("axis", -1);
  TensorData y = Run1(c);
  EXPECT_EQ(y.type(), (TensorType{DType::kI64, {2, 1}}));
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{1, 0}));
  c.attrs.SetInt("select_last_index", 1);
  c.attrs.SetInt("keepdims", 0);
  EXPECT_EQ(Values<int64_t>(Run1(c)), (std::vector<int64_t>{2, 2}));
  OpCall m{"ArgMin", {x}};
  EXPECT_EQ(Values<int64_t>(Run1(m)), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(Values<int64_t>(Run1({"ArgMax", {I32({3}, {3, 9, -1})}})), (std::vector<int64_t>{1}));
  OpCall bad{"ArgMax", {x}};
  bad.attrs.SetInt("axis", 2);
  test::ExpectError(bad, "out of range");
}

std::vector<double> SoftmaxLoop(const std::vector<float>& x, int64_t outer, int64_t axis, int64_t inner,
                                int kind) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t a) { return o * axis * inner + a * inner + j; };
      double mx = -INFINITY, sum = 0;
      int64_t arg = 0;
      for (int64_t a = 0; a < axis; ++a) {
        if (x[at(a)] > mx) {
          mx = x[at(a)];
          arg = a;
        }
      }
      for (int64_t a = 0; a < axis; ++a) sum += std::exp(x[at(a)] - mx);
      for (int64_t a = 0; a < axis; ++a) {
        if (kind == 0) y[at(a)] = std::exp(x[at(a)] - mx) / sum;
        if (kind == 1) y[at(a)] = x[at(a)] - mx - std::log(sum);
        if (kind == 2) y[at(a)] = a == arg ? 1.0 : 0.0;
      }
    }
  }
  return y;
}

TEST(Softmax, PerAxisFromOpset13AndFlattenedBefore) {
  const std::vector<int64_t> dims = {2, 3, 4, 5};
  const std::vector<float> x = Random(120, 9, -5.0f, 5.0f);
  const char* ops[] = {"Softmax", "LogSoftmax", "Hardmax"};
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(ops[kind]);
    // Opset 13: default axis -1; axis 1 alone (strided).
    test::ExpectNear(Values<float>(Run1({ops[kind], {F32(dims, x)}})), SoftmaxLoop(x, 24, 5, 1, kind), 1e-5,
                     1e-6);
    OpCall axis1{ops[kind], {F32(dims, x)}};
    axis1.attrs.SetInt("axis", 1);
    test::ExpectNear(Values<float>(Run1(axis1)), SoftmaxLoop(x, 2, 3, 20, kind), 1e-5, 1e-6);
    OpCall negative{ops[kind], {F32(dims, x)}};
    negative.attrs.SetInt("axis", -3);
    test::ExpectNear(Values<float>(Run1(negative)), SoftmaxLoop(x, 2, 3, 20, kind), 1e-5, 1e-6);
    // Opset 11: default axis 1, flattened to [2, 60].
    OpCall old{ops[kind], {F32(dims, x)}};
    old.opset = 11;
    test::ExpectNear(Values<float>(Run1(old)), SoftmaxLoop(x, 2, 60, 1, kind), 1e-5, 1e-6);
    old.attrs.SetInt("axis", -2);
    test::ExpectNear(Values<float>(Run1(old)), SoftmaxLoop(x, 6, 20, 1, kind), 1e-5, 1e-6);
  }
  OpCall bad{"Softmax", {F32(dims, x)}};
  bad.attrs.SetInt("axis", 4);
  test::ExpectError(bad, "out of range");
  test::ExpectError({"Softmax", {I64({2}, {1, 2})}}, "not a float type");
}

TEST(Softmax, AttentionSizedRowsOverThreads) {
  ThreadPool pool(2);
  const std::vector<float> x = Random(12 * 197 * 197, 4, -8.0f, 8.0f);
  OpCall c{"Softmax", {F32({1, 12, 197, 197}, x)}};
  const std::vector<float> serial = Values<float>(Run1(c));
  c.pool = &pool;
  EXPECT_EQ(Values<float>(Run1(c)), serial);
  test::ExpectNear(serial, SoftmaxLoop(x, 12 * 197, 197, 1, 0), 1e-5, 1e-7);
}

TEST(Softmax, ChannelSoftmaxOverThreads) {
  // A detector's distribution head: softmax over 16 bins along axis 1.
  ThreadPool pool(2);
  const std::vector<float> x = Random(16 * 4 * 2100, 5, -6.0f, 6.0f);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    OpCall c{op, {F32({1, 16, 4, 2100}, x)}};
    c.attrs.SetInt("axis", 1);
    const std::vector<float> serial = Values<float>(Run1(c));
    c.pool = &pool;
    EXPECT_EQ(Values<float>(Run1(c)), serial) << op;
    test::ExpectNear(serial, SoftmaxLoop(x, 1, 16, 4 * 2100, std::string(op) == "Softmax" ? 0 : 1), 1e-5,
                     1e-6);
  }
}

TEST(CumSum, ExclusiveAndReverse) {
  TensorData x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Values<float>(Run1({"CumSum", {x, I64({}, {1})}})), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(Values<float>(Run1({"CumSum", {x, I32({}, {-2})}})), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  OpCall c{"CumSum", {x, I64({}, {1})}};
  c.attrs.SetInt("exclusive", 1);
  c.attrs.SetInt("reverse", 1);
  EXPECT_EQ(Values<float>(Run1(c)), (std::vector<float>{5, 3, 0, 11, 6, 0}));
  EXPECT_EQ(Values<int64_t>(Run1({"CumSum", {I64({3}, {1, 2, 3}), I64({}, {0})}})),
            (std::vector<int64_t>{1, 3, 6}));
  test::ExpectError({"CumSum", {x, I64({}, {2})}}, "out of range");
}

TEST(TopK, LargestOrSmallestWithStableTies) {
  TensorData x = F32({2, 4}, {1.0f, 4.0f, 4.0f, 2.0f, -1.0f, 0.0f, 3.0f, 3.0f});
  OpCall c{"TopK", {x, I64({1}, {2})}};
  c.num_outputs = 2;
  auto out = test::Run(c);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].type(), (TensorType{DType::kF32, {2, 2}}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{4, 4, 3, 3}));
  EXPECT_EQ(Values<int64_t>((*out)[1]), (std::vector<int64_t>{1, 2, 2, 3}));
  OpCall smallest{"TopK", {x, I64({1}, {3})}};
  smallest.num_outputs = 2;
  smallest.attrs.SetInt("largest", 0);
  smallest.attrs.SetInt("axis", 0);
  auto s = test::Run(smallest);
  ASSERT_FALSE(s.ok());  // K = 3 > 2 along axis 0
  EXPECT_NE(s.status().message().find("K = 3"), std::string::npos) << s.status().message();
  smallest.inputs[1] = I64({1}, {1});
  auto s1 = test::Run(smallest);
  ASSERT_TRUE(s1.ok()) << s1.status().message();
  EXPECT_EQ(Values<float>((*s1)[0]), (std::vector<float>{-1, 0, 3, 2}));
  EXPECT_EQ(Values<int64_t>((*s1)[1]), (std::vector<int64_t>{1, 1, 1, 0}));
  // Opset 1: K as an attribute.
  OpCall old{"TopK", {x}};
  old.num_outputs = 2;
  old.opset = 1;
  old.attrs.SetInt("k", 1);
  auto o = test::Run(old);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(Values<int64_t>((*o)[1]), (std::vector<int64_t>{1, 2}));
}

TEST(LayerNorm, RowsWithStatisticsAndBroadcastScale) {
  const int64_t rows = 6, cols = 40;
  const std::vector<float> x = Random(rows * cols, 21, -3.0f, 5.0f);
  const std::vector<float> scale = Random(cols, 22, 0.5f, 2.0f);
  const std::vector<float> bias = Random(cols, 23);
  std::vector<double> want(rows * cols), mean(rows), inv(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, sq = 0;
    for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
    mean[r] = s / cols;
    for (int64_t c = 0; c < cols; ++c) sq += std::pow(x[r * cols + c] - mean[r], 2);
    inv[r] = 1.0 / std::sqrt(sq / cols + 1e-5);
    for (int64_t c = 0; c < cols; ++c)
      want[r * cols + c] = (x[r * cols + c] - mean[r]) * inv[r] * scale[c] + bias[c];
  }
  OpCall c{"LayerNormalization", {F32({2, 3, cols}, x), F32({cols}, scale), F32({cols}, bias)}};
  c.num_outputs = 3;
  auto out = test::Run(c);
  ASSERT_TRUE(out.ok()) << out.status().message();
  test::ExpectNear(Values<float>((*out)[0]), want, 1e-5, 1e-5);
  EXPECT_EQ((*out)[1].type(), (TensorType{DType::kF32, {2, 3, 1}}));
  test::ExpectNear(Values<float>((*out)[1]), mean, 1e-5, 1e-6);
  test::ExpectNear(Values<float>((*out)[2]), inv, 1e-5, 1e-6);
  // axis 1: the last two dims together; a scalar scale broadcasts; no bias.
  OpCall wide{"LayerNormalization", {F32({2, 3, cols}, x), F32({1}, {2.0f})}};
  wide.attrs.SetInt("axis", 1);
  wide.attrs.SetFloat("epsilon", 1e-3);
  std::vector<double> want2(rows * cols);
  for (int b = 0; b < 2; ++b) {
    const int64_t n = 3 * cols;
    double s = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) s += x[b * n + i];
    const double m = s / n;
    for (int64_t i = 0; i < n; ++i) sq += std::pow(x[b * n + i] - m, 2);
    for (int64_t i = 0; i < n; ++i) want2[b * n + i] = 2.0 * (x[b * n + i] - m) / std::sqrt(sq / n + 1e-3);
  }
  test::ExpectNear(Values<float>(Run1(wide)), want2, 1e-5, 1e-5);
  test::ExpectError({"LayerNormalization", {F32({2, 4}, Random(8, 1)), F32({3}, {1, 1, 1})}},
                    "do not broadcast");
}

TEST(Normalization, BatchInstanceGroupLpMvn) {
  const std::vector<float> x = Random(2 * 4 * 6, 31, -3.0f, 3.0f);
  const std::vector<float> scale = {0.5f, 1.0f, 1.5f, 2.0f};
  const std::vector<float> bias = {0.1f, -0.2f, 0.3f, 0.0f};
  const std::vector<float> mean = {0.2f, -0.1f, 0.0f, 1.0f};
  const std::vector<float> var = {1.0f, 0.5f, 2.0f, 0.25f};
  const std::vector<int64_t> dims = {2, 4, 2, 3};
  auto at = [](int64_t n, int64_t c, int64_t i) { return (n * 4 + c) * 6 + i; };

  std::vector<double> bn(48);
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 4; ++c) {
      for (int i = 0; i < 6; ++i) {
        bn[at(n, c, i)] = (x[at(n, c, i)] - mean[c]) / std::sqrt(var[c] + 1e-5) * scale[c] + bias[c];
      }
    }
  }
  OpCall batch{"BatchNormalization",
               {F32(dims, x), F32({4}, scale), F32({4}, bias), F32({4}, mean), F32({4}, var)}};
  test::ExpectNear(Values<float>(Run1(batch)), bn, 1e-5, 1e-6);
  batch.attrs.SetInt("training_mode", 1);
  test::ExpectError(batch, "training mode");

  // Groups of `per` channels: InstanceNormalization is per = 1.
  auto group_norm = [&](int per, bool per_channel) {
    std::vector<double> y(48);
    for (int n = 0; n < 2; ++n) {
      for (int g = 0; g < 4 / per; ++g) {
        double s = 0, sq = 0;
        const int cnt = per * 6;
        for (int c = g * per; c < (g + 1) * per; ++c) {
          for (int i = 0; i < 6; ++i) s += x[at(n, c, i)];
        }
        const double m = s / cnt;
        for (int c = g * per; c < (g + 1) * per; ++c) {
          for (int i = 0; i < 6; ++i) sq += std::pow(x[at(n, c, i)] - m, 2);
        }
        const double inv = 1.0 / std::sqrt(sq / cnt + 1e-5);
        for (int c = g * per; c < (g + 1) * per; ++c) {
          const int p = per_channel ? c : g;
          for (int i = 0; i < 6; ++i) y[at(n, c, i)] = (x[at(n, c, i)] - m) * inv * scale[p] + bias[p];
        }
      }
    }
    return y;
  };
  test::ExpectNear(
      Values<float>(Run1({"InstanceNormalization", {F32(dims, x), F32({4}, scale), F32({4}, bias)}})),
      group_norm(1, true), 1e-5, 1e-5);
  OpCall group18{"GroupNormalization", {F32(dims, x), F32({2}, {0.5f, 1.0f}), F32({2}, {0.1f, -0.2f})}};
  group18.attrs.SetInt("num_groups", 2);
  group18.opset = 18;
  test::ExpectNear(Values<float>(Run1(group18)), group_norm(2, false), 1e-5, 1e-5);
  OpCall group21{"GroupNormalization", {F32(dims, x), F32({4}, scale), F32({4}, bias)}};
  group21.attrs.SetInt("num_groups", 2);
  group21.opset = 21;
  test::ExpectNear(Values<float>(Run1(group21)), group_norm(2, true), 1e-5, 1e-5);
  group21.attrs.SetInt("num_groups", 3);
  test::ExpectError(group21, "does not divide");

  OpCall lp{"LpNormalization", {F32({2, 3}, {3, 4, 0, 1, -1, 2})}};
  lp.attrs.SetInt("axis", 1);
  lp.attrs.SetInt("p", 1);
  test::ExpectNear(Values<float>(Run1(lp)), {3.0 / 7, 4.0 / 7, 0, 0.25, -0.25, 0.5});
  lp.attrs.SetInt("p", 2);
  test::ExpectNear(Values<float>(Run1(lp)),
                   {0.6, 0.8, 0, 1 / std::sqrt(6.0), -1 / std::sqrt(6.0), 2 / std::sqrt(6.0)});

  // MVN over N, H, W per channel (the default axes).
  std::vector<double> mvn(48);
  for (int c = 0; c < 4; ++c) {
    double s = 0, sq = 0;
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < 6; ++i) {
        s += x[at(n, c, i)];
        sq += x[at(n, c, i)] * double(x[at(n, c, i)]);
      }
    }
    const double m = s / 12, sd = std::sqrt(sq / 12 - m * m);
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < 6; ++i) mvn[at(n, c, i)] = (x[at(n, c, i)] - m) / (sd + 1e-9);
    }
  }
  test::ExpectNear(Values<float>(Run1({"MeanVarianceNormalization", {F32(dims, x)}})), mvn, 1e-5, 1e-5);
}

}  // namespace reduce_ops_tests
}  // namespace kiln

namespace kiln {
namespace reduce_ops_tests {

// Tensors with a zero dimension run without touching memory they do not own.
TEST(EmptyTensors, EveryFamilyMember) {
  TensorData empty = test::F32({0, 3}, {});
  EXPECT_EQ(Run1({"Add", {empty, test::F32({3}, {1, 2, 3})}}).type(), (TensorType{DType::kF32, {0, 3}}));
  EXPECT_EQ(Run1({"Softmax", {empty}}).type(), (TensorType{DType::kF32, {0, 3}}));
  EXPECT_EQ(Run1({"Sigmoid", {empty}}).type(), (TensorType{DType::kF32, {0, 3}}));
  EXPECT_EQ(Run1({"LayerNormalization", {empty, test::F32({3}, {1, 1, 1})}}).type(),
            (TensorType{DType::kF32, {0, 3}}));
  OpCall sum{"ReduceSum", {empty, test::I64({1}, {0})}};
  EXPECT_EQ(test::Values<float>(Run1(sum)), (std::vector<float>{0, 0, 0}));
  OpCall max{"ReduceMax", {empty}};
  max.attrs.SetInts("axes", {0});
  max.opset = 13;
  EXPECT_EQ(test::Values<float>(Run1(max))[0], -std::numeric_limits<float>::infinity());
  OpCall arg{"ArgMax", {empty}};
  test::ExpectError(arg, "empty");
  OpCall topk{"TopK", {empty, test::I64({1}, {0})}};
  topk.num_outputs = 2;
  ASSERT_TRUE(test::Run(topk).ok());
  EXPECT_EQ(Run1({"CumSum", {empty, test::I64({}, {0})}}).type(), (TensorType{DType::kF32, {0, 3}}));
  OpCall cast{"Cast", {empty}};
  cast.attrs.SetInt("to", 7);
  EXPECT_EQ(Run1(cast).type(), (TensorType{DType::kI64, {0, 3}}));
  EXPECT_EQ(Run1({"Where", {test::Bool({0, 1}, {}), empty, test::F32({}, {0})}}).type(),
            (TensorType{DType::kF32, {0, 3}}));
  EXPECT_EQ(Run1({"Sum", {empty, empty, test::F32({1}, {2})}}).type(), (TensorType{DType::kF32, {0, 3}}));
}

}  // namespace reduce_ops_tests
}  // namespace kiln

namespace kiln {
namespace reduce_ops_tests {

TEST(ReduceFlops, CountTheInputNotTheOutput) {
  const TensorType x{DType::kF32, {4, 100}};
  const AttributeMap attrs;
  ShapeContext ctx;
  ctx.attrs = &attrs;
  ctx.inputs.push_back(TensorOpInput{&x, nullptr});
  ctx.op_type = "ReduceSum";
  EXPECT_EQ(TensorOpFlops(ctx, {TensorType{DType::kF32, {1, 1}}}), 400.0);
  ctx.op_type = "Softmax";
  EXPECT_EQ(TensorOpFlops(ctx, {x}), 2000.0);
  ctx.op_type = "LayerNormalization";
  EXPECT_EQ(TensorOpFlops(ctx, {x}), 2800.0);
  ctx.op_type = "Relu";
  EXPECT_EQ(TensorOpFlops(ctx, {x}), 400.0);
}

}  // namespace reduce_ops_tests
}  // namespace kiln
