// What many ops' shape inference shares: numpy broadcasting, axes that may
// be negative, inputs that must be known at compile time.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "graph/tensor_op.h"

namespace kiln {

// The numpy-broadcast shape of a and b; the error names the node.
Expected<std::vector<int64_t>> BroadcastDims(const ShapeContext& ctx, const std::vector<int64_t>& a,
                                             const std::vector<int64_t>& b);

// axis in [-rank, rank) as a non-negative index.
Expected<int64_t> NormalizeAxis(const ShapeContext& ctx, int64_t axis, int64_t rank);

// Input i's elements as int64, which must be known at compile time (a
// shape, axes, pads); the error says kiln needs static shapes.
Expected<std::vector<int64_t>> ConstantInts(const ShapeContext& ctx, size_t i, const char* what);

// Output 0 of input 0's type (unary elementwise ops).
Expected<ShapeResult> SameAsInput0(const ShapeContext& ctx);

// A result with one output.
ShapeResult OneOutput(TensorType t);

}  // namespace kiln
