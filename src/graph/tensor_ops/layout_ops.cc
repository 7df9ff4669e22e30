// kiln.Reorder: the layout stage's conversion of a 4-d activation between
// memory layouts (attributes `from` and `to`, TensorLayoutName's spelling).
// The dims stay N,C,H,W whatever the layout; only the bytes move.
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

Expected<ShapeResult> InferReorder(const ShapeContext& ctx) {
  TensorLayout layouts[2];
  const char* names[2] = {"from", "to"};
  for (int i = 0; i < 2; ++i) {
    auto name = ctx.a().String(names[i]);
    if (!name.ok()) return InvalidArgument("{} {}: attribute '{}' missing", ctx.op_type, ctx.node, names[i]);
    if (!ParseTensorLayout(*name, &layouts[i])) {
      return InvalidArgument("{} {}: {} '{}' is none of row-major, nhwc, nchw16c", ctx.op_type, ctx.node,
                             names[i], *name);
    }
  }
  const TensorType& x = *ctx.input(0).type;
  const bool moves = layouts[0] != TensorLayout::kRowMajor || layouts[1] != TensorLayout::kRowMajor;
  if (moves && x.rank() != 4) {
    return InvalidArgument("{} {}: a layout other than row-major needs a 4-d tensor, not {}", ctx.op_type,
                           ctx.node, x.ToString());
  }
  return OneOutput(x);
}

double NoFlops(const ShapeContext&, const std::vector<TensorType>&) {
  return 0;
}

}  // namespace

void AddLayoutOpDefs(std::vector<TensorOpDef>* ops) {
  TensorOpDef d;
  d.op_type = "kiln.Reorder";
  d.infer = InferReorder;
  d.flops = NoFlops;
  ops->push_back(d);
}

}  // namespace kiln
