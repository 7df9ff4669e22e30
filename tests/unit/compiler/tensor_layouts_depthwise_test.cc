// The layout stage on a MobileNet-style inverted residual block (1x1
// expand, depthwise 3x3, 1x1 project, residual Add): on AVX-512 the
// depthwise convolution starts an nchw16c chain that covers the whole block
// (kiln's own nchw16c kernels run the three convolutions), with reorders
// only at the graph's input and output, and computes what the row-major
// compile computes.
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
namespace tensor_layouts_depthwise_tests {

constexpr int64_t kC = 24, kWide = 72, kSide = 28;

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

// x -> Conv 1x1 (24 -> 72) -> Relu -> Conv 3x3 depthwise -> HardSigmoid
//   -> Conv 1x1 (72 -> 24) -> Add x -> y.
Result CompileAndRun(bool layouts) {
  Graph g;
  const TensorType narrow{DType::kF32, {1, kC, kSide, kSide}}, wide{DType::kF32, {1, kWide, kSide, kSide}};
  const ValueId x = g.AddTensorValue("x", narrow);
  g.value(x).is_graph_input = true;
  g.value(x).io_slot = 0;
  const ValueId e = g.AddTensorValue("e", wide), er = g.AddTensorValue("er", wide);
  const ValueId d = g.AddTensorValue("d", wide), dr = g.AddTensorValue("dr", wide);
  const ValueId p = g.AddTensorValue("p", narrow), y = g.AddTensorValue("y", narrow);
  Node expand =
      TensorNode("Conv", "expand",
                 {x, SeededConstant(g, "we", {kWide, kC, 1, 1}, 1), SeededConstant(g, "be", {kWide}, 2)}, e);
  g.AddNode(std::move(expand));
  g.AddNode(TensorNode("Relu", "relu", {e}, er));
  Node dw =
      TensorNode("Conv", "depthwise",
                 {er, SeededConstant(g, "wd", {kWide, 1, 3, 3}, 3), SeededConstant(g, "bd", {kWide}, 4)}, d);
  dw.named_attrs.SetInt("group", kWide);
  dw.named_attrs.SetInts("pads", {1, 1, 1, 1});
  g.AddNode(std::move(dw));
  g.AddNode(TensorNode("HardSigmoid", "gate", {d}, dr));
  g.AddNode(TensorNode("Conv", "project", {dr, SeededConstant(g, "wp", {kC, kWide, 1, 1}, 5)}, p));
  g.AddNode(TensorNode("Add", "residual", {p, x}, y));
  g.value(y).is_output = true;
  g.value(y).io_slot = 1;

  TensorCompileOptions options;
  options.layouts = layouts;
  const std::vector<float> in = SeededValues(static_cast<size_t>(narrow.ElementCount()), 6);
  CompiledRun run = CompileAndRunOnce(std::move(g), x, y, options, in, in.size());
  Result r;
  if (run.model == nullptr) return r;
  r.y = std::move(run.y);
  r.nodes = NodeLayouts(run.model->graph());
  return r;
}

TEST(TensorLayoutsDepthwise, AnInvertedResidualBlockRunsBlockedOnAvx512AndMatchesRowMajor) {
  const Result blocked = CompileAndRun(true);
  const Result plain = CompileAndRun(false);
  ASSERT_EQ(blocked.y.size(), plain.y.size());
  float scale = 1;
  for (float v : plain.y) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < plain.y.size(); ++i)
    ASSERT_NEAR(blocked.y[i], plain.y[i], 1e-5f * scale) << "at " << i;

  int reorders = 0, blocked_convs = 0, convs = 0;
  for (const auto& [op, layout] : blocked.nodes) {
    reorders += op == "kiln.Reorder";
    const bool conv = op == "Conv" || op == "kiln.FusedConv";
    convs += conv;
    blocked_convs += conv && layout == "nchw16c";
  }
  if (GetCpuInfo().BestIsa() != "avx512") {
    EXPECT_EQ(reorders, 0);
    EXPECT_EQ(blocked_convs, 0);
    return;
  }
  EXPECT_EQ(blocked_convs, convs);
  EXPECT_GE(convs, 3);
  EXPECT_EQ(reorders, 2);  // x in, y out
}

}  // namespace tensor_layouts_depthwise_tests
}  // namespace kiln
