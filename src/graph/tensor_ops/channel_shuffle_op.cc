// kiln.ChannelShuffle: ShuffleNet's channel shuffle as one op, made by the
// fusion stage from Concat (axis 1) -> Reshape [N, g, C/g, H, W] ->
// Transpose [0, 2, 1, 3, 4] -> Reshape [N, C, H, W]. Its inputs are the
// concatenated parts (4-d, one dtype, the same N, H, W); attribute `groups`
// is g. Output channel j * g + i is channel i * (C / g) + j of the parts
// joined along the channels.
#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/tensor_op_families.h"

namespace kiln {
namespace {

Expected<ShapeResult> InferChannelShuffle(const ShapeContext& ctx) {
  auto groups = ctx.a().Int("groups");
  if (!groups.ok() || *groups < 1) {
    return InvalidArgument("{} {}: attribute 'groups' must be a positive integer", ctx.op_type, ctx.node);
  }
  const TensorType& first = *ctx.input(0).type;
  TensorType out = first;
  if (first.rank() != 4) {
    return InvalidArgument("{} {}: the parts must be 4-d, not {}", ctx.op_type, ctx.node, first.ToString());
  }
  out.dims[1] = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorType& t = *ctx.input(i).type;
    if (t.rank() != 4 || t.dtype != first.dtype || t.dims[0] != first.dims[0] || t.dims[2] != first.dims[2] ||
        t.dims[3] != first.dims[3]) {
      return InvalidArgument("{} {}: part {} is {}, the first {}: they differ in more than the channels",
                             ctx.op_type, ctx.node, i, t.ToString(), first.ToString());
    }
    out.dims[1] += t.dims[1];
  }
  if (out.dims[1] % *groups != 0) {
    return InvalidArgument("{} {}: {} channels do not split into {} groups", ctx.op_type, ctx.node,
                           out.dims[1], *groups);
  }
  return OneOutput(out);
}

double NoFlops(const ShapeContext&, const std::vector<TensorType>&) {
  return 0;
}

}  // namespace

void AddChannelShuffleOpDef(std::vector<TensorOpDef>* ops) {
  TensorOpDef d;
  d.op_type = "kiln.ChannelShuffle";
  d.min_inputs = 1;
  d.max_inputs = 64;
  d.infer = InferChannelShuffle;
  d.flops = NoFlops;
  ops->push_back(d);
}

}  // namespace kiln
