// The layout stage in a real compile: a chain of big convolutions runs in
// nchw16c on AVX-512 (oneDNN's blocked kernels are the fast path there),
// with reorders only at its borders, and computes what the row-major
// compile computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/compiled_tensor_graph.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "unit/compiler/tensor_graph_builder.h"

namespace kiln {
namespace tensor_layouts_compile_tests {

constexpr int64_t kC = 32, kSide = 40;  // 30 MFLOP per 3x3 convolution: blocked pays

using testing::SeededConstant;
using testing::SeededValues;
using testing::TensorNode;

struct Result {
  std::vector<float> y, s;
  std::vector<std::string> layout_lines;
  std::vector<std::pair<std::string, std::string>> nodes;  // op, activation_layout
};

// x -> Conv(W1, b1) -> Relu -> Conv(W2) -> y; Relu's output also -> Softmax -> s.
Result CompileAndRun(bool layouts) {
  Graph g;
  const TensorType act{DType::kF32, {1, kC, kSide, kSide}};
  const ValueId x = g.AddTensorValue("x", act);
  g.value(x).is_graph_input = true;
  g.value(x).io_slot = 0;
  const ValueId w1 =
      g.AddConstant("w1", TensorData::FromValues(DType::kF32, {kC, kC, 3, 3}, SeededValues(kC * kC * 9, 1)));
  const ValueId b1 = g.AddConstant("b1", TensorData::FromValues(DType::kF32, {kC}, SeededValues(kC, 2)));
  const ValueId w2 =
      g.AddConstant("w2", TensorData::FromValues(DType::kF32, {kC, kC, 3, 3}, SeededValues(kC * kC * 9, 3)));
  const ValueId c1 = g.AddTensorValue("c1", act), r1 = g.AddTensorValue("r1", act);
  const ValueId y = g.AddTensorValue("y", act), s = g.AddTensorValue("s", act);
  for (auto [name, in, w, b, out] :
       {std::tuple{"conv1", x, w1, b1, c1}, std::tuple{"conv2", r1, w2, kNoValue, y}}) {
    Node conv =
        TensorNode("Conv", name, b == kNoValue ? std::vector<ValueId>{in, w} : std::vector<ValueId>{in, w, b}, out);
    conv.named_attrs.SetInts("pads", {1, 1, 1, 1});
    conv.named_attrs.SetInts("kernel_shape", {3, 3});
    g.AddNode(std::move(conv));
    if (out == c1) g.AddNode(TensorNode("Relu", "relu", {c1}, r1));
  }
  Node softmax = TensorNode("Softmax", "softmax", {r1}, s);
  softmax.named_attrs.SetInt("axis", 1);
  g.AddNode(std::move(softmax));
  g.value(y).is_output = true;
  g.value(y).io_slot = 1;
  g.value(s).is_output = true;
  g.value(s).io_slot = 2;

  TensorCompileOptions options;
  options.layouts = layouts;
  auto compiled = CompiledTensorGraph::Compile(std::move(g), {x}, {y, s}, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  Result r;
  if (!compiled.ok()) return r;
  const std::vector<float> in = SeededValues(static_cast<size_t>(act.ElementCount()), 4);
  r.y.resize(static_cast<size_t>(act.ElementCount()));
  r.s.resize(r.y.size());
  ThreadPool pool(2);
  const Status st = (*compiled)->Run({in.data()}, {r.y.data(), r.s.data()}, &pool, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  r.layout_lines = (*compiled)->report().layout.activation_layouts;
  for (const Node& n : (*compiled)->graph().nodes()) {
    auto l = n.named_attrs.String("activation_layout");
    r.nodes.emplace_back(n.op == OpKind::kTensorOp ? n.op_type : OpName(n.op), l.ok() ? *l : "row-major");
  }
  return r;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  float scale = 1;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f * scale) << "at " << i;
}

TEST(TensorLayoutsCompile, AConvChainRunsBlockedOnAvx512AndMatchesRowMajor) {
  const Result blocked = CompileAndRun(true);
  const Result plain = CompileAndRun(false);
  ExpectClose(blocked.y, plain.y);
  ExpectClose(blocked.s, plain.s);
  for (const auto& [op, layout] : plain.nodes) EXPECT_EQ(layout, "row-major") << op;
  EXPECT_EQ(plain.layout_lines, std::vector<std::string>{"activations: row-major throughout"});

  int reorders = 0, blocked_convs = 0;
  for (const auto& [op, layout] : blocked.nodes) {
    reorders += op == "kiln.Reorder";
    blocked_convs += (op == "Conv" || op == "kiln.FusedConv") && layout == "nchw16c";
    if (op == "Softmax") {
      EXPECT_EQ(layout, "row-major");
    }
  }
  if (GetCpuInfo().BestIsa() != "avx512") {
    // Elsewhere kiln's own row-major kernels are the fast path.
    EXPECT_EQ(reorders, 0);
    EXPECT_EQ(blocked_convs, 0);
    return;
  }
  // Both convolutions (the first with its Relu fused) blocked; reorders: x
  // in, y out (the graph output) and Relu's output once, for the Softmax.
  EXPECT_EQ(blocked_convs, 2);
  EXPECT_EQ(reorders, 3);
  ASSERT_FALSE(blocked.layout_lines.empty());
  EXPECT_EQ(blocked.layout_lines.front().rfind("activations nchw16c on cpu: 2 nodes", 0), 0u)
      << blocked.layout_lines.front();
}

}  // namespace tensor_layouts_compile_tests
}  // namespace kiln
