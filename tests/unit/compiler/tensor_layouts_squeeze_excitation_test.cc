// The layout stage on a MobileNetV3-style Squeeze-Excitation block
// (depthwise 5x5, GlobalAveragePool, 1x1 conv + Relu and 1x1 conv +
// HardSigmoid on the 1x1 image, Mul scaling the block's tensor per channel):
// on AVX-512 the whole block stays nchw16c (the 1x1-image convolutions on
// kiln's nchw16c matrix-vector kernel), with reorders only at the graph's
// input and output, and computes what the row-major compile computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "compiler/compiled_tensor_graph.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "unit/compiler/tensor_graph_builder.h"

namespace kiln {
namespace tensor_layouts_squeeze_excitation_tests {

constexpr int64_t kC = 40, kSqueeze = 10, kSide = 9;

using testing::SeededConstant;
using testing::CompileAndRunOnce;
using testing::CompiledRun;
using testing::NodeLayouts;
using testing::SeededValues;
using testing::TensorNode;

struct Result {
  std::vector<float> y;
  std::vector<std::pair<std::string, std::string>> nodes;  // op, activation_layout
};

Result CompileAndRun(bool layouts) {
  Graph g;
  const TensorType image{DType::kF32, {1, kC, kSide, kSide}}, pooled{DType::kF32, {1, kC, 1, 1}},
      squeezed{DType::kF32, {1, kSqueeze, 1, 1}};
  const ValueId x = g.AddTensorValue("x", image);
  g.value(x).is_graph_input = true;
  g.value(x).io_slot = 0;
  const ValueId d = g.AddTensorValue("d", image), p = g.AddTensorValue("p", pooled);
  const ValueId s = g.AddTensorValue("s", squeezed), sr = g.AddTensorValue("sr", squeezed);
  const ValueId e = g.AddTensorValue("e", pooled), gate = g.AddTensorValue("gate", pooled);
  const ValueId y = g.AddTensorValue("y", image);
  Node dw = TensorNode("Conv", "depthwise",
                       {x, SeededConstant(g, "wd", {kC, 1, 5, 5}, 1), SeededConstant(g, "bd", {kC}, 2)}, d);
  dw.named_attrs.SetInt("group", kC);
  dw.named_attrs.SetInts("pads", {2, 2, 2, 2});
  g.AddNode(std::move(dw));
  g.AddNode(TensorNode("GlobalAveragePool", "pool", {d}, p));
  g.AddNode(TensorNode(
      "Conv", "fc1",
      {p, SeededConstant(g, "w1", {kSqueeze, kC, 1, 1}, 3), SeededConstant(g, "b1", {kSqueeze}, 4)}, s));
  g.AddNode(TensorNode("Relu", "relu", {s}, sr));
  g.AddNode(TensorNode(
      "Conv", "fc2", {sr, SeededConstant(g, "w2", {kC, kSqueeze, 1, 1}, 5), SeededConstant(g, "b2", {kC}, 6)},
      e));
  g.AddNode(TensorNode("HardSigmoid", "scale_activation", {e}, gate));
  g.AddNode(TensorNode("Mul", "scale", {d, gate}, y));
  g.value(y).is_output = true;
  g.value(y).io_slot = 1;

  TensorCompileOptions options;
  options.layouts = layouts;
  const std::vector<float> in = SeededValues(static_cast<size_t>(image.ElementCount()), 7);
  CompiledRun run = CompileAndRunOnce(std::move(g), x, y, options, in, in.size());
  Result r;
  if (run.model == nullptr) return r;
  r.y = std::move(run.y);
  r.nodes = NodeLayouts(run.model->graph());
  return r;
}

TEST(TensorLayoutsSqueezeExcitation, TheBlockStaysBlockedOnAvx512AndMatchesRowMajor) {
  const Result blocked = CompileAndRun(true);
  const Result plain = CompileAndRun(false);
  ASSERT_EQ(blocked.y.size(), plain.y.size());
  float scale = 1;
  for (float v : plain.y) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < plain.y.size(); ++i)
    ASSERT_NEAR(blocked.y[i], plain.y[i], 1e-5f * scale) << "at " << i;

  int reorders = 0, blocked_nodes = 0, others = 0;
  for (const auto& [op, layout] : blocked.nodes) {
    if (op == "kiln.Reorder") {
      ++reorders;
    } else {
      ++others;
      blocked_nodes += layout == "nchw16c";
    }
  }
  if (GetCpuInfo().BestIsa() != "avx512") {
    EXPECT_EQ(reorders, 0);
    EXPECT_EQ(blocked_nodes, 0);
    return;
  }
  EXPECT_EQ(blocked_nodes, others);
  EXPECT_EQ(reorders, 2);  // x in, y out
}

}  // namespace tensor_layouts_squeeze_excitation_tests
}  // namespace kiln
