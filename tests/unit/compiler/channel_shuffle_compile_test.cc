// The fusion of ShuffleNet's channel shuffle into kiln.ChannelShuffle, and
// the reshapes and channel slices that become views of their input's
// buffer, in a real compile: the fused graph computes what the unfused one
// does.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "compiler/compiled_tensor_graph.h"
#include "core/thread_pool.h"
#include "unit/compiler/tensor_graph_builder.h"

namespace kiln {
namespace channel_shuffle_compile_tests {

using testing::CompileAndRunOnce;
using testing::CompiledRun;
using testing::SeededValues;
using testing::TensorNode;

constexpr int64_t kC = 48, kSide = 6;

struct Result {
  std::vector<float> y;
  std::vector<std::string> ops;
  std::vector<std::string> layout_lines;
};

ValueId Ints(Graph& g, const char* name, std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return g.AddConstant(name, TensorData::FromValues<int64_t>(DType::kI64, {n}, std::move(v)));
}

// x -> Relu -> Slice halves -> (a, Relu(b)) -> Concat -> Reshape [1, 2, 24, 6, 6]
// -> Transpose [0, 2, 1, 3, 4] -> Reshape [1, 48, 6, 6] -> Relu -> Reshape
// [1, 48 * 36] -> Softmax -> y.
Result CompileAndRun(bool fuse) {
  Graph g;
  const TensorType act{DType::kF32, {1, kC, kSide, kSide}}, half{DType::kF32, {1, kC / 2, kSide, kSide}};
  const ValueId x = g.AddTensorValue("x", act);
  g.value(x).is_graph_input = true;
  g.value(x).io_slot = 0;
  const ValueId a = g.AddTensorValue("a", half), b0 = g.AddTensorValue("b0", half),
                b = g.AddTensorValue("b", half);
  const ValueId axes = Ints(g, "axes", {1});
  const ValueId xr = g.AddTensorValue("xr", act);
  g.AddNode(TensorNode("Relu", "relu_x", {x}, xr));
  g.AddNode(TensorNode("Slice", "slice_a", {xr, Ints(g, "s0", {0}), Ints(g, "e0", {kC / 2}), axes}, a));
  g.AddNode(TensorNode("Slice", "slice_b", {xr, Ints(g, "s1", {kC / 2}), Ints(g, "e1", {kC}), axes}, b0));
  g.AddNode(TensorNode("Relu", "relu_b", {b0}, b));
  const ValueId joined = g.AddTensorValue("joined", act);
  Node concat = TensorNode("Concat", "concat", {a, b}, joined);
  concat.named_attrs.SetInt("axis", 1);
  g.AddNode(std::move(concat));
  const ValueId split = g.AddTensorValue("split", {DType::kF32, {1, 2, kC / 2, kSide, kSide}});
  g.AddNode(
      TensorNode("Reshape", "reshape", {joined, Ints(g, "shape5", {1, 2, kC / 2, kSide, kSide})}, split));
  const ValueId swapped = g.AddTensorValue("swapped", {DType::kF32, {1, kC / 2, 2, kSide, kSide}});
  Node transpose = TensorNode("Transpose", "transpose", {split}, swapped);
  transpose.named_attrs.SetInts("perm", {0, 2, 1, 3, 4});
  g.AddNode(std::move(transpose));
  const ValueId shuffled = g.AddTensorValue("shuffled", act), r = g.AddTensorValue("r", act);
  g.AddNode(
      TensorNode("Reshape", "reshape_1", {swapped, Ints(g, "shape4", {1, kC, kSide, kSide})}, shuffled));
  g.AddNode(TensorNode("Relu", "relu", {shuffled}, r));
  const ValueId flat = g.AddTensorValue("flat", {DType::kF32, {1, kC * kSide * kSide}});
  g.AddNode(TensorNode("Reshape", "flatten", {r, Ints(g, "shape2", {1, kC * kSide * kSide})}, flat));
  const ValueId y = g.AddTensorValue("y", {DType::kF32, {1, kC * kSide * kSide}});
  Node softmax = TensorNode("Softmax", "softmax", {flat}, y);
  softmax.named_attrs.SetInt("axis", 1);
  g.AddNode(std::move(softmax));
  g.value(y).is_output = true;
  g.value(y).io_slot = 1;

  TensorCompileOptions options;
  options.fuse = fuse;
  const std::vector<float> in = SeededValues(static_cast<size_t>(act.ElementCount()), 4);
  CompiledRun run =
      CompileAndRunOnce(std::move(g), x, y, options, in, static_cast<size_t>(act.ElementCount()));
  Result res;
  if (run.model == nullptr) return res;
  res.y = std::move(run.y);
  for (const Node& n : run.model->graph().nodes()) res.ops.push_back(n.op_type);
  res.layout_lines = run.model->report().layout.activation_layouts;
  return res;
}

int Count(const std::vector<std::string>& v, const std::string& s) {
  return static_cast<int>(std::count(v.begin(), v.end(), s));
}

TEST(ChannelShuffleCompile, FusedShuffleComputesWhatTheUnfusedOpsDo) {
  const Result fused = CompileAndRun(true), plain = CompileAndRun(false);
  ASSERT_EQ(fused.y.size(), plain.y.size());
  for (size_t i = 0; i < fused.y.size(); ++i) ASSERT_NEAR(fused.y[i], plain.y[i], 1e-7f) << i;
  EXPECT_EQ(Count(fused.ops, "kiln.ChannelShuffle"), 1);
  EXPECT_EQ(Count(fused.ops, "Concat") + Count(fused.ops, "Transpose"), 0);
  EXPECT_EQ(Count(plain.ops, "kiln.ChannelShuffle"), 0);
  EXPECT_EQ(Count(plain.ops, "Transpose"), 1);
}

TEST(ChannelShuffleCompile, ReshapesAndChannelHalvesOfArenaValuesAreViews) {
  const Result fused = CompileAndRun(true), plain = CompileAndRun(false);
  // Both: the two halves (of one image: contiguous) and the flatten before
  // the softmax; unfused, both reshapes of the shuffle too.
  for (const Result* r : {&fused, &plain}) {
    EXPECT_EQ(Count(r->ops, "Reshape"), 0);
    EXPECT_EQ(Count(r->ops, "Slice"), 0);
  }
  auto views_line = [](const Result& r) {
    for (const std::string& l : r.layout_lines)
      if (l.rfind("views:", 0) == 0) return l;
    return std::string();
  };
  const std::string tail = " reshapes, slices and splits share their input's buffer (no step at run time)";
  EXPECT_EQ(views_line(fused), "views: 3" + tail);
  EXPECT_EQ(views_line(plain), "views: 5" + tail);
}

}  // namespace channel_shuffle_compile_tests
}  // namespace kiln
