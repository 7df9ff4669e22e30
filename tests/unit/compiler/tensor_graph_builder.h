// Helpers for the compiler tests that build tensor graphs by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/compiled_tensor_graph.h"
#include "core/thread_pool.h"
#include "graph/graph.h"
#include "graph/tensor_data.h"

namespace kiln::testing {

// A tensor op node of the default domain (opset 13) with one output.
inline Node TensorNode(const char* op, const char* name, std::vector<ValueId> in, ValueId out) {
  Node n;
  n.op = OpKind::kTensorOp;
  n.op_type = op;
  n.name = name;
  n.opset = 13;
  n.inputs = std::move(in);
  n.outputs = {out};
  return n;
}

// n deterministic values in [-0.5, 0.5), different for each seed.
inline std::vector<float> SeededValues(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 7919 + static_cast<size_t>(seed) * 104729) % 2003) / 2003.0f - 0.5f;
  return v;
}

// An f32 constant of `dims` filled with SeededValues.
inline ValueId SeededConstant(Graph& g, const char* name, std::vector<int64_t> dims, int seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return g.AddConstant(
      name, TensorData::FromValues(DType::kF32, std::move(dims), SeededValues(static_cast<size_t>(n), seed)));
}

// A graph compiled and run once: the model (null when compiling failed) and
// its output.
struct CompiledRun {
  std::unique_ptr<CompiledTensorGraph> model;
  std::vector<float> y;
};

// Compiles g (graph input x, output y) with `options` and runs it once on
// two threads on `input`; y has out_elems floats. A failure to compile or
// run fails the calling test.
inline CompiledRun CompileAndRunOnce(Graph g, ValueId x, ValueId y, const TensorCompileOptions& options,
                                     const std::vector<float>& input, size_t out_elems) {
  CompiledRun run;
  auto compiled = CompiledTensorGraph::Compile(std::move(g), {x}, {y}, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  if (!compiled.ok()) return run;
  run.model = std::move(*compiled);
  run.y.resize(out_elems);
  ThreadPool pool(2);
  const Status st = run.model->Run({input.data()}, {run.y.data()}, &pool, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return run;
}

// Each node of a compiled graph as (op, activation_layout), "row-major" where
// it has none.
inline std::vector<std::pair<std::string, std::string>> NodeLayouts(const Graph& g) {
  std::vector<std::pair<std::string, std::string>> nodes;
  for (const Node& n : g.nodes()) {
    auto l = n.named_attrs.String("activation_layout");
    nodes.emplace_back(n.op == OpKind::kTensorOp ? n.op_type : OpName(n.op), l.ok() ? *l : "row-major");
  }
  return nodes;
}

}  // namespace kiln::testing
