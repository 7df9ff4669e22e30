// The table of tensor ops, gathered from the families.
#include "graph/tensor_op.h"

#include <algorithm>

#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

std::vector<TensorOpDef> BuildTable() {
  std::vector<TensorOpDef> ops;
  AddElementwiseOpDefs(&ops);
  AddShapeOpDefs(&ops);
  AddReduceOpDefs(&ops);
  AddConvOpDefs(&ops);
  AddMatMulOpDefs(&ops);
  AddQuantOpDefs(&ops);
  AddLayoutOpDefs(&ops);
  AddChannelShuffleOpDef(&ops);
  std::sort(ops.begin(), ops.end(), [](const TensorOpDef& a, const TensorOpDef& b) { return a.op_type < b.op_type; });
  return ops;
}

}  // namespace

const std::vector<TensorOpDef>& AllTensorOps() {
  static const std::vector<TensorOpDef> table = BuildTable();
  return table;
}

const TensorOpDef* FindTensorOp(std::string_view op_type) {
  const auto& ops = AllTensorOps();
  auto it = std::lower_bound(ops.begin(), ops.end(), op_type,
                             [](const TensorOpDef& d, std::string_view name) { return d.op_type < name; });
  return it != ops.end() && it->op_type == op_type ? &*it : nullptr;
}

Expected<ShapeResult> InferTensorOp(const ShapeContext& ctx) {
  const TensorOpDef* def = FindTensorOp(ctx.op_type);
  if (def == nullptr) return Unsupported("{} {}: kiln does not know the op '{}'", ctx.op_type, ctx.node, ctx.op_type);
  // Trailing omitted inputs count as absent.
  int given = static_cast<int>(ctx.inputs.size());
  while (given > 0 && !ctx.inputs[static_cast<size_t>(given - 1)].present()) --given;
  if (given < def->min_inputs || given > def->max_inputs) {
    return InvalidArgument("{} {}: takes {} to {} inputs, got {}", ctx.op_type, ctx.node, def->min_inputs,
                           def->max_inputs, given);
  }
  for (int i = 0; i < def->min_inputs; ++i) {
    if (!ctx.inputs[static_cast<size_t>(i)].present()) {
      return InvalidArgument("{} {}: input {} is required", ctx.op_type, ctx.node, i);
    }
  }
  if (ctx.num_outputs < def->min_outputs || ctx.num_outputs > def->max_outputs) {
    return InvalidArgument("{} {}: has {} to {} outputs, got {}", ctx.op_type, ctx.node, def->min_outputs,
                           def->max_outputs, ctx.num_outputs);
  }
  KILN_ASSIGN_OR_RETURN(ShapeResult result, def->infer(ctx));
  if (static_cast<int>(result.outputs.size()) < ctx.num_outputs) {
    return Internal("{} {}: shape inference gave {} outputs for {}", ctx.op_type, ctx.node, result.outputs.size(),
                    ctx.num_outputs);
  }
  result.outputs.resize(static_cast<size_t>(ctx.num_outputs));
  result.constants.resize(result.outputs.size());
  for (const TensorType& t : result.outputs) {
    for (int64_t d : t.dims) {
      if (d < 0) return InvalidArgument("{} {}: output shape [{}] has a negative dimension", ctx.op_type, ctx.node,
                                        DimsToString(t.dims));
    }
  }
  return result;
}

double TensorOpFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs) {
  const TensorOpDef* def = FindTensorOp(ctx.op_type);
  if (def != nullptr && def->flops != nullptr) return def->flops(ctx, outputs);
  double n = 0;
  for (const TensorType& t : outputs) n += static_cast<double>(t.ElementCount());
  return n;
}

}  // namespace kiln
