// HardSwish written out as exporters write it (PyTorch below opset 14:
// Mul(x, HardSigmoid(x; 1/6)); Paddle: Mul(x, Clip(x + 3, 0, 6)) / 6; and
// x * (Clip(x + 3, 0, 6) / 6)) becomes the epilogue of the convolution
// before it, and computes what the unfused graph computes; near misses
// (another HardSigmoid slope, a third reader of x) stay unfused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/compiled_tensor_graph.h"
#include "core/thread_pool.h"
#include "unit/compiler/tensor_graph_builder.h"

namespace kiln {
namespace tensor_fusions_hardswish_tests {

using testing::SeededConstant;
using testing::CompileAndRunOnce;
using testing::CompiledRun;
using testing::SeededValues;
using testing::TensorNode;

constexpr int64_t kC = 8, kM = 20, kSide = 7;

ValueId Scalar(Graph& g, const char* name, float v) {
  return g.AddConstant(name, TensorData::FromValues(DType::kF32, {}, std::vector<float>{v}));
}

// Adds the activation's nodes reading `c` (the conv's output); returns the
// value that is the activation's result.
using Activation = std::function<ValueId(Graph&, ValueId c, const TensorType&)>;

struct Result {
  std::vector<float> y;
  std::vector<std::string> ops;
  std::string activation;  // of the one kiln.FusedConv, if any
};

// x -> Conv 3x3 (scaled so that the outputs cross -3 and 3) -> activation -> y.
Result CompileAndRun(const Activation& act, bool fuse) {
  Graph g;
  const TensorType in{DType::kF32, {1, kC, kSide, kSide}}, out{DType::kF32, {1, kM, kSide, kSide}};
  const ValueId x = g.AddTensorValue("x", in);
  g.value(x).is_graph_input = true;
  g.value(x).io_slot = 0;
  const ValueId c = g.AddTensorValue("c", out);
  Node conv = TensorNode("Conv", "conv",
                         {x, SeededConstant(g, "w", {kM, kC, 3, 3}, 1), SeededConstant(g, "b", {kM}, 2)}, c);
  conv.named_attrs.SetInts("pads", {1, 1, 1, 1});
  g.AddNode(std::move(conv));
  const ValueId y = act(g, c, out);
  g.value(y).is_output = true;
  g.value(y).io_slot = 1;

  TensorCompileOptions options;
  options.fuse = fuse;
  std::vector<float> input = SeededValues(static_cast<size_t>(in.ElementCount()), 3);
  for (float& v : input) v *= 12.0f;
  CompiledRun run =
      CompileAndRunOnce(std::move(g), x, y, options, input, static_cast<size_t>(out.ElementCount()));
  Result r;
  if (run.model == nullptr) return r;
  r.y = std::move(run.y);
  for (const Node& n : run.model->graph().nodes()) {
    if (n.op != OpKind::kTensorOp || n.op_type == "kiln.Reorder") continue;
    r.ops.push_back(n.op_type);
    if (n.op_type == "kiln.FusedConv") {
      auto a = n.named_attrs.String("activation");
      r.activation = a.ok() ? *a : "";
    }
  }
  return r;
}

void ExpectSameValues(const Result& fused, const Result& plain) {
  ASSERT_EQ(fused.y.size(), plain.y.size());
  float scale = 1;
  for (float v : plain.y) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < plain.y.size(); ++i)
    ASSERT_NEAR(fused.y[i], plain.y[i], 1e-5f * scale) << "at " << i;
}

ValueId Node1(Graph& g, const char* op, const char* name, std::vector<ValueId> in, const TensorType& t) {
  const ValueId o = g.AddTensorValue(name, t);
  g.AddNode(TensorNode(op, name, std::move(in), o));
  return o;
}

// Mul(x, HardSigmoid(x; alpha)).
Activation TorchHardSwish(float alpha) {
  return [alpha](Graph& g, ValueId c, const TensorType& t) {
    const ValueId h = g.AddTensorValue("h", t);
    Node hs = TensorNode("HardSigmoid", "hs", {c}, h);
    hs.named_attrs.SetFloat("alpha", alpha);
    g.AddNode(std::move(hs));
    return Node1(g, "Mul", "mul", {c, h}, t);
  };
}

// Clip(x + 3, 0, 6) with the bounds as constant inputs (opset 11+).
ValueId Relu6Shifted(Graph& g, ValueId c, const TensorType& t) {
  const ValueId a = Node1(g, "Add", "add3", {c, Scalar(g, "three", 3.0f)}, t);
  return Node1(g, "Clip", "clip", {a, Scalar(g, "lo", 0.0f), Scalar(g, "hi", 6.0f)}, t);
}

TEST(TensorFusionsHardSwish, MulOfHardSigmoidOneSixthBecomesTheConvEpilogue) {
  const Result fused = CompileAndRun(TorchHardSwish(1.0f / 6.0f), true);
  EXPECT_EQ(fused.ops, std::vector<std::string>{"kiln.FusedConv"});
  EXPECT_EQ(fused.activation, "HardSwish");
  ExpectSameValues(fused, CompileAndRun(TorchHardSwish(1.0f / 6.0f), false));
}

TEST(TensorFusionsHardSwish, PaddleFormsBecomeTheConvEpilogue) {
  const Activation mul_then_div = [](Graph& g, ValueId c, const TensorType& t) {
    const ValueId m = Node1(g, "Mul", "mul", {c, Relu6Shifted(g, c, t)}, t);
    return Node1(g, "Div", "div6", {m, Scalar(g, "six", 6.0f)}, t);
  };
  const Activation sixth_then_mul = [](Graph& g, ValueId c, const TensorType& t) {
    const ValueId s = Node1(g, "Mul", "sixth", {Relu6Shifted(g, c, t), Scalar(g, "k", 1.0f / 6.0f)}, t);
    return Node1(g, "Mul", "mul", {s, c}, t);
  };
  for (const Activation& act : {mul_then_div, sixth_then_mul}) {
    const Result fused = CompileAndRun(act, true);
    EXPECT_EQ(fused.ops, std::vector<std::string>{"kiln.FusedConv"});
    EXPECT_EQ(fused.activation, "HardSwish");
    ExpectSameValues(fused, CompileAndRun(act, false));
  }
}

TEST(TensorFusionsHardSwish, NearMissesStayApart) {
  // Another slope is a HardSigmoid gate, not HardSwish: the conv keeps only
  // the bias, as x has two readers.
  const Result other_slope = CompileAndRun(TorchHardSwish(0.2f), true);
  EXPECT_EQ(other_slope.ops, (std::vector<std::string>{"Conv", "HardSigmoid", "Mul"}));
  ExpectSameValues(other_slope, CompileAndRun(TorchHardSwish(0.2f), false));
  // x read a third time.
  const Activation third_reader = [](Graph& g, ValueId c, const TensorType& t) {
    const ValueId hs = TorchHardSwish(1.0f / 6.0f)(g, c, t);
    return Node1(g, "Add", "plus_x", {hs, c}, t);
  };
  const Result fused = CompileAndRun(third_reader, true);
  EXPECT_EQ(fused.activation, "");
  ExpectSameValues(fused, CompileAndRun(third_reader, false));
}

}  // namespace tensor_fusions_hardswish_tests
}  // namespace kiln
