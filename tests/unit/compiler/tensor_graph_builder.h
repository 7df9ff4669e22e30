// Helpers for the compiler tests that build tensor graphs by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

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
  return g.AddConstant(name, TensorData::FromValues(DType::kF32, std::move(dims),
                                                    SeededValues(static_cast<size_t>(n), seed)));
}

}  // namespace kiln::testing
