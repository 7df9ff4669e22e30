// Channel Concats whose inputs are written in place in the output's buffer
// (compiler/concat_views.h), in a real compile: where it applies the Concat
// node goes and the graph still computes the same; where it must not (the
// output is caller memory, an input already lives in another Concat's
// output, a part that would start unaligned) the Concat stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "compiler/compiled_tensor_graph.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "unit/compiler/tensor_graph_builder.h"

namespace kiln {
namespace concat_views_tests {

using testing::SeededConstant;
using testing::SeededValues;
using testing::TensorNode;

struct Result {
  std::vector<std::vector<float>> outputs;
  std::vector<std::string> ops;
  std::string concat_views_line;
  int blocked_convs = 0;
};

ValueId Input(Graph& g, const char* name, const TensorType& t, int32_t slot) {
  const ValueId v = g.AddTensorValue(name, t);
  g.value(v).is_graph_input = true;
  g.value(v).io_slot = slot;
  return v;
}

void MarkOutput(Graph& g, ValueId v, int32_t slot) {
  g.value(v).is_output = true;
  g.value(v).io_slot = slot;
}

ValueId Unary(Graph& g, const char* op, const char* name, ValueId x) {
  const ValueId y = g.AddTensorValue(std::string(name) + "_out", g.value(x).tensor_type());
  g.AddNode(TensorNode(op, name, {x}, y));
  return y;
}

ValueId Concat(Graph& g, const char* name, std::vector<ValueId> parts) {
  TensorType t = g.value(parts[0]).tensor_type();
  t.dims[1] = 0;
  for (ValueId p : parts) t.dims[1] += g.value(p).dims[1];
  const ValueId y = g.AddTensorValue(std::string(name) + "_out", t);
  Node n = TensorNode("Concat", name, std::move(parts), y);
  n.named_attrs.SetInt("axis", 1);
  g.AddNode(std::move(n));
  return y;
}

// Compiles g (inputs then outputs by io_slot) and runs it on seeded inputs.
Result CompileAndRun(Graph g, const std::vector<ValueId>& inputs, const std::vector<ValueId>& outputs,
                     const TensorCompileOptions& options = {}) {
  std::vector<std::vector<float>> in;
  std::vector<const void*> in_ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(SeededValues(static_cast<size_t>(g.value(inputs[i]).cols), static_cast<int>(i) + 1));
  }
  for (const auto& v : in) in_ptrs.push_back(v.data());
  Result res;
  for (ValueId o : outputs) res.outputs.emplace_back(static_cast<size_t>(g.value(o).cols));
  std::vector<void*> out_ptrs;
  for (auto& v : res.outputs) out_ptrs.push_back(v.data());
  auto compiled = CompiledTensorGraph::Compile(std::move(g), inputs, outputs, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  if (!compiled.ok()) return res;
  ThreadPool pool(2);
  const Status st = (*compiled)->Run(in_ptrs, out_ptrs, &pool, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  for (const Node& n : (*compiled)->graph().nodes()) {
    res.ops.push_back(n.op_type);
    auto layout = n.named_attrs.String("activation_layout");
    if (n.op_type == "Conv" || n.op_type == "kiln.FusedConv")
      res.blocked_convs += layout.ok() && *layout == "nchw16c";
  }
  for (const std::string& l : (*compiled)->report().layout.activation_layouts) {
    if (l.find("concats") != std::string::npos) res.concat_views_line = l;
  }
  return res;
}

int Count(const std::vector<std::string>& v, const std::string& s) {
  return static_cast<int>(std::count(v.begin(), v.end(), s));
}

float Sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}

// Expects out[c][p] == f(c, p) over `channels` x `pixels`.
void ExpectValues(const std::vector<float>& out, int64_t channels, int64_t pixels,
                  const std::function<float(int64_t, int64_t)>& f) {
  ASSERT_EQ(out.size(), static_cast<size_t>(channels * pixels));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t p = 0; p < pixels; ++p) {
      ASSERT_NEAR(out[static_cast<size_t>(c * pixels + p)], f(c, p), 1e-6f)
          << "channel " << c << " pixel " << p;
    }
  }
}

// YOLO's C2f: a = Relu(x); Split a -> a0, a1; m = Sigmoid(a1);
// Concat(a0, a1, m) -> Relu -> y. The Split is a view of a, and a and m are
// written in place in the Concat's output: no copy left.
TEST(ConcatViews, SplitThenConcatOfOneImageCopiesNothing) {
  constexpr int64_t kC = 32, kPixels = 36;
  Graph g;
  const ValueId x = Input(g, "x", {DType::kF32, {1, kC, 6, 6}}, 0);
  const ValueId a = Unary(g, "Relu", "relu_a", x);
  const TensorType half{DType::kF32, {1, kC / 2, 6, 6}};
  const ValueId a0 = g.AddTensorValue("a0", half), a1 = g.AddTensorValue("a1", half);
  const ValueId sizes =
      g.AddConstant("sizes", TensorData::FromValues<int64_t>(DType::kI64, {2}, {kC / 2, kC / 2}));
  Node split = TensorNode("Split", "split", {a, sizes}, a0);
  split.outputs = {a0, a1};
  split.named_attrs.SetInt("axis", 1);
  g.AddNode(std::move(split));
  const ValueId m = Unary(g, "Sigmoid", "sigmoid_m", a1);
  const ValueId joined = Concat(g, "concat", {a0, a1, m});
  const ValueId y = Unary(g, "Relu", "relu_y", joined);
  MarkOutput(g, y, 1);
  const Result r = CompileAndRun(std::move(g), {x}, {y});
  EXPECT_EQ(Count(r.ops, "Concat"), 0);
  EXPECT_EQ(Count(r.ops, "Split"), 0);
  EXPECT_EQ(
      r.concat_views_line,
      "views: 1 concats have their inputs written in place in their output's buffer (no step at run time)");
  const std::vector<float> xs = SeededValues(kC * kPixels, 1);
  auto relu_x = [&](int64_t c, int64_t p) {
    return std::max(0.0f, xs[static_cast<size_t>(c * kPixels + p)]);
  };
  ExpectValues(r.outputs[0], kC + kC / 2, kPixels, [&](int64_t c, int64_t p) {
    return c < kC ? relu_x(c, p) : Sigmoid(relu_x(c - kC + kC / 2, p));
  });
}

// The Concat's output is the caller's buffer: the parts are not written there.
TEST(ConcatViews, GraphOutputStaysACopy) {
  constexpr int64_t kC = 16, kPixels = 36;
  Graph g;
  const ValueId x = Input(g, "x", {DType::kF32, {1, kC, 6, 6}}, 0);
  const ValueId a = Unary(g, "Relu", "relu_a", x), b = Unary(g, "Sigmoid", "sigmoid_b", x);
  const ValueId y = Concat(g, "concat", {a, b});
  MarkOutput(g, y, 1);
  const Result r = CompileAndRun(std::move(g), {x}, {y});
  EXPECT_EQ(Count(r.ops, "Concat"), 1);
  EXPECT_EQ(r.concat_views_line, "");
  const std::vector<float> xs = SeededValues(kC * kPixels, 1);
  ExpectValues(r.outputs[0], 2 * kC, kPixels, [&](int64_t c, int64_t p) {
    const float v = xs[static_cast<size_t>((c % kC) * kPixels + p)];
    return c < kC ? std::max(0.0f, v) : Sigmoid(v);
  });
}

// a is joined by two Concats: it can live in only one output's buffer, so
// the second Concat stays a copy (of a, from the first one's output).
TEST(ConcatViews, InputOfTwoConcatsIsPlacedInOne) {
  constexpr int64_t kC = 16, kPixels = 36;
  Graph g;
  const ValueId x = Input(g, "x", {DType::kF32, {1, kC, 6, 6}}, 0);
  const ValueId a = Unary(g, "Relu", "relu_a", x), b = Unary(g, "Sigmoid", "sigmoid_b", x),
                c = Unary(g, "Neg", "neg_c", x);
  const ValueId y1 = Concat(g, "concat_1", {a, b}), y2 = Concat(g, "concat_2", {c, a});
  const ValueId y = g.AddTensorValue("y", g.value(y1).tensor_type());
  g.AddNode(TensorNode("Add", "add", {y1, y2}, y));
  MarkOutput(g, y, 1);
  const Result r = CompileAndRun(std::move(g), {x}, {y});
  EXPECT_EQ(Count(r.ops, "Concat"), 1);
  EXPECT_EQ(
      r.concat_views_line,
      "views: 1 concats have their inputs written in place in their output's buffer (no step at run time)");
  const std::vector<float> xs = SeededValues(kC * kPixels, 1);
  ExpectValues(r.outputs[0], 2 * kC, kPixels, [&](int64_t ch, int64_t p) {
    const float v = xs[static_cast<size_t>((ch % kC) * kPixels + p)];
    return ch < kC ? std::max(0.0f, v) - v : Sigmoid(v) + std::max(0.0f, v);
  });
}

// A first part of 24 channels of 5x5: not whole nchw16c blocks, and its end
// (2400 bytes) is no 64-byte boundary in row-major; the Concat stays a copy.
TEST(ConcatViews, PartsThatDoNotEndOnABlockStayACopy) {
  constexpr int64_t kC = 24, kPixels = 25;
  Graph g;
  const ValueId x = Input(g, "x", {DType::kF32, {1, kC, 5, 5}}, 0);
  const ValueId a = Unary(g, "Relu", "relu_a", x), b = Unary(g, "Sigmoid", "sigmoid_b", x);
  const ValueId joined = Concat(g, "concat", {a, b});
  const ValueId y = Unary(g, "Relu", "relu_y", joined);
  MarkOutput(g, y, 1);
  const Result r = CompileAndRun(std::move(g), {x}, {y});
  EXPECT_EQ(Count(r.ops, "Concat"), 1);
  EXPECT_EQ(r.concat_views_line, "");
  const std::vector<float> xs = SeededValues(kC * kPixels, 1);
  ExpectValues(r.outputs[0], 2 * kC, kPixels, [&](int64_t c, int64_t p) {
    const float v = xs[static_cast<size_t>((c % kC) * kPixels + p)];
    return c < kC ? std::max(0.0f, v) : Sigmoid(v);
  });
}

ValueId Conv3x3(Graph& g, const char* name, ValueId x, int64_t out_channels, int seed) {
  TensorType t = g.value(x).tensor_type();
  const ValueId w =
      SeededConstant(g, (std::string(name) + "_w").c_str(), {out_channels, t.dims[1], 3, 3}, seed);
  t.dims[1] = out_channels;
  const ValueId y = g.AddTensorValue(std::string(name) + "_out", t);
  Node conv = TensorNode("Conv", name, {x, w}, y);
  conv.named_attrs.SetInts("pads", {1, 1, 1, 1});
  conv.named_attrs.SetInts("kernel_shape", {3, 3});
  g.AddNode(std::move(conv));
  return y;
}

// The C2f pattern between convolutions big enough to run nchw16c on
// AVX-512: conv -> Split halves -> conv on the second -> Concat(both halves,
// its output) -> conv. The parts are whole channel blocks, so the Concat is
// views there too, and the graph computes what it does row-major.
TEST(ConcatViews, BlockedSplitThenConcatMatchesRowMajor) {
  constexpr int64_t kC = 32, kSide = 40;
  auto build_and_run = [&](bool layouts) {
    Graph g;
    const ValueId x = Input(g, "x", {DType::kF32, {1, kC, kSide, kSide}}, 0);
    const ValueId a = Conv3x3(g, "conv_a", x, kC, 1);
    const TensorType half{DType::kF32, {1, kC / 2, kSide, kSide}};
    const ValueId a0 = g.AddTensorValue("a0", half), a1 = g.AddTensorValue("a1", half);
    const ValueId sizes =
        g.AddConstant("sizes", TensorData::FromValues<int64_t>(DType::kI64, {2}, {kC / 2, kC / 2}));
    Node split = TensorNode("Split", "split", {a, sizes}, a0);
    split.outputs = {a0, a1};
    split.named_attrs.SetInt("axis", 1);
    g.AddNode(std::move(split));
    const ValueId m = Conv3x3(g, "conv_m", a1, kC / 2, 2);
    const ValueId joined = Concat(g, "concat", {a0, a1, m});
    const ValueId y = Conv3x3(g, "conv_y", joined, kC, 3);
    MarkOutput(g, y, 1);
    TensorCompileOptions options;
    options.layouts = layouts;
    return CompileAndRun(std::move(g), {x}, {y}, options);
  };
  const Result blocked = build_and_run(true), plain = build_and_run(false);
  for (const Result* r : {&blocked, &plain}) {
    EXPECT_EQ(Count(r->ops, "Concat") + Count(r->ops, "Split"), 0);
    EXPECT_EQ(r->concat_views_line,
              "views: 1 concats have their inputs written in place in their output's buffer (no step at run "
              "time)");
  }
  EXPECT_EQ(plain.blocked_convs, 0);
  if (GetCpuInfo().BestIsa() == "avx512") {
    EXPECT_EQ(blocked.blocked_convs, 3);
  }
  ASSERT_EQ(blocked.outputs[0].size(), plain.outputs[0].size());
  float scale = 1;
  for (float v : plain.outputs[0]) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < plain.outputs[0].size(); ++i) {
    ASSERT_NEAR(blocked.outputs[0][i], plain.outputs[0][i], 1e-5f * scale) << "at " << i;
  }
}

}  // namespace concat_views_tests
}  // namespace kiln
