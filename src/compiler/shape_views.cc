// Shape-only nodes as views of their input (see shape_views.h).
#include "compiler/shape_views.h"

namespace kiln {
namespace {

bool RenamesDims(const Node& n) {
  if (n.op != OpKind::kTensorOp || n.dead || n.outputs.size() != 1 || n.inputs.empty()) return false;
  return n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" || n.op_type == "Unsqueeze";
}

// A value in the arena, row-major: one a view may share.
bool InArena(const Value& v) {
  return v.is_tensor() && !v.is_preset() && !v.is_output && v.io_slot < 0 && v.col_offset == 0 &&
         v.layout == TensorLayout::kRowMajor;
}

}  // namespace

Expected<int> MakeShapeOnlyNodesViews(Graph& g, const std::string& cpu_backend) {
  int made = 0;
  for (Node& n : g.nodes()) {
    if (!RenamesDims(n) || n.backend != cpu_backend || n.named_attrs.Has("activation_layout")) continue;
    const ValueId x = n.inputs[0], y = n.outputs[0];
    if (x == kNoValue) continue;
    const ValueId storage = g.StorageOf(x);
    const Value& xv = g.value(x);
    const Value& sv = g.value(storage);
    const Value& yv = g.value(y);
    if (!InArena(xv) || !InArena(sv) || !InArena(yv) || yv.view_of != kNoValue) continue;
    if (xv.dtype != yv.dtype || xv.cols != yv.cols || sv.domain != yv.domain) continue;
    g.value(y).view_of = storage;
    n.dead = true;
    ++made;
  }
  KILN_RETURN_IF_ERROR(g.Compact());
  return made;
}

}  // namespace kiln
