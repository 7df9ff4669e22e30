// Shared shape-inference helpers.
#include "graph/tensor_ops/shape_helpers.h"

#include <algorithm>

namespace kiln {

Expected<std::vector<int64_t>> BroadcastDims(const ShapeContext& ctx, const std::vector<int64_t>& a,
                                             const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return InvalidArgument("{} {}: shapes [{}] and [{}] do not broadcast", ctx.op_type, ctx.node, DimsToString(a),
                             DimsToString(b));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Expected<int64_t> NormalizeAxis(const ShapeContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    return InvalidArgument("{} {}: axis {} is out of range for rank {}", ctx.op_type, ctx.node, axis, rank);
  }
  return axis < 0 ? axis + rank : axis;
}

Expected<std::vector<int64_t>> ConstantInts(const ShapeContext& ctx, size_t i, const char* what) {
  TensorOpInput in = ctx.input(i);
  if (!in.present()) return InvalidArgument("{} {}: the {} input is missing", ctx.op_type, ctx.node, what);
  if (in.constant == nullptr) {
    return Unsupported("{} {}: the {} input is computed at run time; kiln compiles static shapes (fix the input "
                       "shapes with --input-shape, or fold it in the exporter)",
                       ctx.op_type, ctx.node, what);
  }
  auto ints = in.constant->ToInt64s();
  if (!ints.ok()) return InvalidArgument("{} {}: the {} input: {}", ctx.op_type, ctx.node, what, ints.status().message());
  return ints;
}

ShapeResult OneOutput(TensorType t) {
  ShapeResult r;
  r.outputs.push_back(std::move(t));
  return r;
}

Expected<ShapeResult> SameAsInput0(const ShapeContext& ctx) { return OneOutput(*ctx.input(0).type); }

}  // namespace kiln
