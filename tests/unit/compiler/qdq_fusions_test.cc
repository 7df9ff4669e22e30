// The QDQ convolution fusion (compiler/qdq_fusions.h) on a small quantized
// convolution: its output against exact integer arithmetic, and against the
// same model with fp32 weights, which the pass leaves alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "compiler/compiled_tensor_graph.h"
#include "core/thread_pool.h"
#include "unit/compiler/tensor_graph_builder.h"

namespace kiln {
namespace qdq_fusions_tests {

constexpr int64_t kIn = 3, kOut = 4, kSide = 7;
constexpr float kXScale = 0.02f, kYScale = 0.05f;
constexpr uint8_t kXZero = 128, kYZero = 100;

struct QdqConv {
  std::vector<float> x = std::vector<float>(kIn * kSide * kSide);
  std::vector<int8_t> w = std::vector<int8_t>(kOut * kIn * 9);
  std::vector<float> w_scale = {0.011f, 0.0073f, 0.019f, 0.0031f};
  std::vector<int32_t> bias = {-700, 35, 1200, -9};
  QdqConv() {
    uint32_t s = 12345;
    auto next = [&] { return (s = s * 1103515245u + 12345u) >> 8; };
    for (float& v : x) v = static_cast<float>(static_cast<int64_t>(next() % 2001) - 1000) / 400.0f;
    for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int64_t>(next() % 255) - 127);
  }
  float BiasScale(int64_t o) const { return kXScale * w_scale[static_cast<size_t>(o)]; }
};

using testing::TensorNode;

template <typename T>
ValueId Constant(Graph& g, const char* name, DType dtype, std::vector<int64_t> dims,
                 const std::vector<T>& v) {
  return g.AddConstant(name, TensorData::FromValues(dtype, std::move(dims), v));
}

// x -> Q -> DQ -> Conv(W, b) [-> Q -> DQ] -> y. With `dq_weights` the
// weights and bias are DequantizeLinear of int8/int32 constants (the QDQ
// form); else they are the same values as fp32 constants.
struct Built {
  Graph g;
  std::vector<ValueId> inputs, outputs;
};

Built Build(const QdqConv& m, bool dq_weights, bool requantize) {
  Built b;
  Graph& g = b.g;
  const std::vector<int64_t> x_dims = {1, kIn, kSide, kSide}, y_dims = {1, kOut, kSide, kSide};
  const ValueId x = g.AddTensorValue("x", TensorType{DType::kF32, x_dims});
  g.value(x).io_slot = 0;
  g.value(x).is_graph_input = true;
  const ValueId sx = Constant(g, "sx", DType::kF32, {}, std::vector<float>{kXScale});
  const ValueId zx = Constant(g, "zx", DType::kU8, {}, std::vector<uint8_t>{kXZero});
  const ValueId xq = g.AddTensorValue("xq", TensorType{DType::kU8, x_dims});
  g.AddNode(TensorNode("QuantizeLinear", "quantize_x", {x, sx, zx}, xq));
  const ValueId xd = g.AddTensorValue("xd", TensorType{DType::kF32, x_dims});
  g.AddNode(TensorNode("DequantizeLinear", "dequantize_x", {xq, sx, zx}, xd));
  ValueId w, bias;
  if (dq_weights) {
    const ValueId wq = Constant(g, "wq", DType::kI8, {kOut, kIn, 3, 3}, m.w);
    const ValueId sw = Constant(g, "sw", DType::kF32, {kOut}, m.w_scale);
    w = g.AddTensorValue("wd", TensorType{DType::kF32, {kOut, kIn, 3, 3}});
    Node dq = TensorNode("DequantizeLinear", "dequantize_w", {wq, sw}, w);
    dq.named_attrs.SetInt("axis", 0);
    g.AddNode(std::move(dq));
    std::vector<float> sb(kOut);
    for (int64_t o = 0; o < kOut; ++o) sb[static_cast<size_t>(o)] = m.BiasScale(o);
    const ValueId bq = Constant(g, "bq", DType::kI32, {kOut}, m.bias);
    const ValueId sbv = Constant(g, "sb", DType::kF32, {kOut}, sb);
    bias = g.AddTensorValue("bd", TensorType{DType::kF32, {kOut}});
    Node bdq = TensorNode("DequantizeLinear", "dequantize_b", {bq, sbv}, bias);
    bdq.named_attrs.SetInt("axis", 0);
    g.AddNode(std::move(bdq));
  } else {
    std::vector<float> wf(m.w.size()), bf(kOut);
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = static_cast<float>(m.w[i]) * m.w_scale[i / (kIn * 9)];
    for (int64_t o = 0; o < kOut; ++o)
      bf[static_cast<size_t>(o)] = static_cast<float>(m.bias[o]) * m.BiasScale(o);
    w = Constant(g, "wf", DType::kF32, {kOut, kIn, 3, 3}, wf);
    bias = Constant(g, "bf", DType::kF32, {kOut}, bf);
  }
  const ValueId y = g.AddTensorValue("y", TensorType{DType::kF32, y_dims});
  Node conv = TensorNode("Conv", "conv", {xd, w, bias}, y);
  conv.named_attrs.SetInts("pads", {1, 1, 1, 1});
  conv.named_attrs.SetInts("kernel_shape", {3, 3});
  g.AddNode(std::move(conv));
  ValueId out = y;
  if (requantize) {
    const ValueId sy = Constant(g, "sy", DType::kF32, {}, std::vector<float>{kYScale});
    const ValueId zy = Constant(g, "zy", DType::kU8, {}, std::vector<uint8_t>{kYZero});
    const ValueId yq = g.AddTensorValue("yq", TensorType{DType::kU8, y_dims});
    g.AddNode(TensorNode("QuantizeLinear", "quantize_y", {y, sy, zy}, yq));
    out = g.AddTensorValue("out", TensorType{DType::kF32, y_dims});
    g.AddNode(TensorNode("DequantizeLinear", "dequantize_y", {yq, sy, zy}, out));
  }
  g.value(out).is_output = true;
  g.value(out).io_slot = 1;
  b.inputs = {x};
  b.outputs = {out};
  return b;
}

struct Ran {
  std::vector<float> y;
  std::vector<std::string> rewrites;
  std::vector<std::string> ops;
};

Ran Compiled(const QdqConv& m, bool dq_weights, bool requantize) {
  Built b = Build(m, dq_weights, requantize);
  auto compiled = CompiledTensorGraph::Compile(std::move(b.g), b.inputs, b.outputs, TensorCompileOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  Ran r;
  if (!compiled.ok()) return r;
  r.y.resize(kOut * kSide * kSide);
  ThreadPool pool(2);
  const Status s = (*compiled)->Run({m.x.data()}, {r.y.data()}, &pool, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  r.rewrites = (*compiled)->report().legalize.rewrites;
  for (const Node& n : (*compiled)->graph().nodes()) r.ops.push_back(n.op_type);
  return r;
}

// The int32 sums of the convolution of the quantized input, bias added.
std::vector<int32_t> ExactSums(const QdqConv& m) {
  std::vector<int32_t> xq(m.x.size());
  for (size_t i = 0; i < xq.size(); ++i) {
    const float q = std::nearbyint(m.x[i] / kXScale) + kXZero;
    xq[i] = static_cast<int32_t>(std::clamp(q, 0.0f, 255.0f)) - kXZero;
  }
  std::vector<int32_t> acc(kOut * kSide * kSide);
  for (int64_t o = 0; o < kOut; ++o) {
    for (int64_t r = 0; r < kSide; ++r) {
      for (int64_t c = 0; c < kSide; ++c) {
        int32_t sum = m.bias[static_cast<size_t>(o)];
        for (int64_t i = 0; i < kIn; ++i) {
          for (int64_t kr = 0; kr < 3; ++kr) {
            for (int64_t kc = 0; kc < 3; ++kc) {
              const int64_t ir = r + kr - 1, ic = c + kc - 1;
              if (ir < 0 || ir >= kSide || ic < 0 || ic >= kSide) continue;
              sum += xq[static_cast<size_t>((i * kSide + ir) * kSide + ic)] *
                     m.w[static_cast<size_t>(((o * kIn + i) * 3 + kr) * 3 + kc)];
            }
          }
        }
        acc[static_cast<size_t>((o * kSide + r) * kSide + c)] = sum;
      }
    }
  }
  return acc;
}

bool Contains(const std::vector<std::string>& v, const std::string& part) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.find(part) != std::string::npos; });
}

TEST(QdqFusions, RequantizedConvolutionMatchesIntegerArithmeticExactly) {
  const QdqConv m;
  const Ran fused = Compiled(m, true, true);
  ASSERT_EQ(fused.y.size(), static_cast<size_t>(kOut * kSide * kSide));
  EXPECT_TRUE(Contains(fused.rewrites, "QuantizeLinear output fused"))
      << ::testing::PrintToString(fused.rewrites);
  EXPECT_TRUE(Contains(fused.ops, "ConvInteger"));
  EXPECT_EQ(std::count(fused.ops.begin(), fused.ops.end(), "Conv"), 0);
  const std::vector<int32_t> acc = ExactSums(m);
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t o = static_cast<int64_t>(i) / (kSide * kSide);
    const float multiplier = kXScale * m.w_scale[static_cast<size_t>(o)] / kYScale;
    const float q =
        std::clamp(std::nearbyint(static_cast<float>(acc[i]) * multiplier) + kYZero, 0.0f, 255.0f);
    ASSERT_EQ(fused.y[i], (q - kYZero) * kYScale) << "element " << i;
  }
  // The fp32 model (weights already dequantized: nothing to fuse) is within
  // one quantization step everywhere.
  const Ran plain = Compiled(m, false, true);
  EXPECT_FALSE(Contains(plain.rewrites, "ConvInteger"));
  EXPECT_EQ(std::count(plain.ops.begin(), plain.ops.end(), "ConvInteger"), 0);
  for (size_t i = 0; i < acc.size(); ++i)
    EXPECT_LE(std::fabs(plain.y[i] - fused.y[i]), kYScale * 1.001f) << i;
}

TEST(QdqFusions, ConvolutionWithFloatOutputIsScaledSums) {
  const QdqConv m;
  const Ran fused = Compiled(m, true, false);
  ASSERT_EQ(fused.y.size(), static_cast<size_t>(kOut * kSide * kSide));
  EXPECT_TRUE(Contains(fused.rewrites, "scaled to f32")) << ::testing::PrintToString(fused.rewrites);
  EXPECT_EQ(std::count(fused.ops.begin(), fused.ops.end(), "Conv"), 0);
  const std::vector<int32_t> acc = ExactSums(m);
  const Ran plain = Compiled(m, false, false);
  for (size_t i = 0; i < acc.size(); ++i) {
    const size_t o = i / (kSide * kSide);
    const int32_t b = m.bias[o];
    const float bias = static_cast<float>(b) * m.BiasScale(static_cast<int64_t>(o));
    const float expected = static_cast<float>(acc[i] - b) * (kXScale * m.w_scale[o]) + bias;
    ASSERT_NEAR(fused.y[i], expected, 1e-6f * std::max(1.0f, std::fabs(expected))) << "element " << i;
    EXPECT_NEAR(plain.y[i], expected, 1e-5f * std::max(1.0f, std::fabs(expected))) << "element " << i;
  }
}

// x [2, 5] -> Q -> DQ -> Gemm(DQ(W int8 [3, 5], per row), DQ(int32 bias), transB)
// [-> Q -> DQ]; or MatMul with W [5, 3] per column and no bias.
struct Product {
  std::vector<float> x = {0.5f, -1.25f, 2.0f, 0.01f, -0.3f, 1.7f, -2.2f, 0.9f, 0.45f, -0.05f};
  std::vector<int8_t> w = {12, -127, 45, 3, 99, -8, 77, -60, 127, 1, 5, -33, 0, 64, -101};  // [3, 5]
  std::vector<float> w_scale = {0.013f, 0.0071f, 0.021f};
  std::vector<int32_t> bias = {300, -45, 12};
};

Ran CompiledProduct(const Product& m, bool gemm, bool requantize) {
  Graph g;
  const ValueId x = g.AddTensorValue("x", TensorType{DType::kF32, {2, 5}});
  g.value(x).io_slot = 0;
  g.value(x).is_graph_input = true;
  const ValueId sx = Constant(g, "sx", DType::kF32, {}, std::vector<float>{kXScale});
  const ValueId zx = Constant(g, "zx", DType::kU8, {}, std::vector<uint8_t>{kXZero});
  const ValueId xq = g.AddTensorValue("xq", TensorType{DType::kU8, {2, 5}});
  g.AddNode(TensorNode("QuantizeLinear", "quantize_x", {x, sx, zx}, xq));
  const ValueId xd = g.AddTensorValue("xd", TensorType{DType::kF32, {2, 5}});
  g.AddNode(TensorNode("DequantizeLinear", "dequantize_x", {xq, sx, zx}, xd));
  std::vector<int8_t> w = m.w;
  if (!gemm) {  // MatMul's weights are [K, N]
    for (int64_t n = 0; n < 3; ++n) {
      for (int64_t k = 0; k < 5; ++k) w[static_cast<size_t>(k * 3 + n)] = m.w[static_cast<size_t>(n * 5 + k)];
    }
  }
  const ValueId wq =
      Constant(g, "wq", DType::kI8, gemm ? std::vector<int64_t>{3, 5} : std::vector<int64_t>{5, 3}, w);
  const ValueId sw = Constant(g, "sw", DType::kF32, {3}, m.w_scale);
  const ValueId wd = g.AddTensorValue(
      "wd", TensorType{DType::kF32, gemm ? std::vector<int64_t>{3, 5} : std::vector<int64_t>{5, 3}});
  Node dq = TensorNode("DequantizeLinear", "dequantize_w", {wq, sw}, wd);
  dq.named_attrs.SetInt("axis", gemm ? 0 : 1);
  g.AddNode(std::move(dq));
  const ValueId y = g.AddTensorValue("y", TensorType{DType::kF32, {2, 3}});
  if (gemm) {
    std::vector<float> sb(3);
    for (size_t n = 0; n < 3; ++n) sb[n] = kXScale * m.w_scale[n];
    const ValueId bq = Constant(g, "bq", DType::kI32, {3}, m.bias);
    const ValueId sbv = Constant(g, "sb", DType::kF32, {3}, sb);
    const ValueId bd = g.AddTensorValue("bd", TensorType{DType::kF32, {3}});
    Node bdq = TensorNode("DequantizeLinear", "dequantize_b", {bq, sbv}, bd);
    bdq.named_attrs.SetInt("axis", 0);
    g.AddNode(std::move(bdq));
    Node op = TensorNode("Gemm", "gemm", {xd, wd, bd}, y);
    op.named_attrs.SetInt("transB", 1);
    g.AddNode(std::move(op));
  } else {
    g.AddNode(TensorNode("MatMul", "matmul", {xd, wd}, y));
  }
  ValueId out = y;
  if (requantize) {
    const ValueId sy = Constant(g, "sy", DType::kF32, {}, std::vector<float>{kYScale});
    const ValueId zy = Constant(g, "zy", DType::kU8, {}, std::vector<uint8_t>{kYZero});
    const ValueId yq = g.AddTensorValue("yq", TensorType{DType::kU8, {2, 3}});
    g.AddNode(TensorNode("QuantizeLinear", "quantize_y", {y, sy, zy}, yq));
    out = g.AddTensorValue("out", TensorType{DType::kF32, {2, 3}});
    g.AddNode(TensorNode("DequantizeLinear", "dequantize_y", {yq, sy, zy}, out));
  }
  g.value(out).is_output = true;
  g.value(out).io_slot = 1;
  auto compiled = CompiledTensorGraph::Compile(std::move(g), {x}, {out}, TensorCompileOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  Ran r;
  if (!compiled.ok()) return r;
  r.y.resize(6);
  ThreadPool pool(1);
  const Status s = (*compiled)->Run({m.x.data()}, {r.y.data()}, &pool, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  r.rewrites = (*compiled)->report().legalize.rewrites;
  for (const Node& n : (*compiled)->graph().nodes()) r.ops.push_back(n.op_type);
  return r;
}

// Row r, column n of the int32 product of the quantized x and W.
int32_t ProductSum(const Product& m, size_t r, size_t n) {
  int32_t sum = 0;
  for (size_t k = 0; k < 5; ++k) {
    const float q = std::clamp(std::nearbyint(m.x[r * 5 + k] / kXScale) + kXZero, 0.0f, 255.0f);
    sum += (static_cast<int32_t>(q) - kXZero) * m.w[n * 5 + k];
  }
  return sum;
}

TEST(QdqFusions, GemmWithTransposedWeightsIsScaledSums) {
  const Product m;
  const Ran r = CompiledProduct(m, true, false);
  ASSERT_EQ(r.y.size(), 6u);
  EXPECT_TRUE(Contains(r.rewrites, "runs as MatMulInteger")) << ::testing::PrintToString(r.rewrites);
  EXPECT_EQ(std::count(r.ops.begin(), r.ops.end(), "Gemm"), 0);
  for (size_t i = 0; i < 6; ++i) {
    const size_t row = i / 3, n = i % 3;
    const float scale = kXScale * m.w_scale[n];
    const float expected =
        static_cast<float>(ProductSum(m, row, n)) * scale + static_cast<float>(m.bias[n]) * scale;
    EXPECT_NEAR(r.y[i], expected, 1e-6f * std::max(1.0f, std::fabs(expected))) << "element " << i;
  }
}

TEST(QdqFusions, RequantizedMatMulMatchesIntegerArithmeticExactly) {
  const Product m;
  const Ran r = CompiledProduct(m, false, true);
  ASSERT_EQ(r.y.size(), 6u);
  EXPECT_TRUE(Contains(r.rewrites, "QuantizeLinear output fused")) << ::testing::PrintToString(r.rewrites);
  EXPECT_EQ(std::count(r.ops.begin(), r.ops.end(), "MatMul"), 0);
  for (size_t i = 0; i < 6; ++i) {
    const size_t row = i / 3, n = i % 3;
    const float multiplier = kXScale * m.w_scale[n] / kYScale;
    const float q = std::clamp(
        std::nearbyint(static_cast<float>(ProductSum(m, row, n)) * multiplier) + kYZero, 0.0f, 255.0f);
    EXPECT_EQ(r.y[i], (q - kYZero) * kYScale) << "element " << i;
  }
}

}  // namespace qdq_fusions_tests
}  // namespace kiln
