// rms_norm (per row or per head group) and the fused add_rms_norm.
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/rms_norm.h"

namespace kiln::cpu {

Expected<Step> BindRmsNorm(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const float* w = VectorWeight(n.weights[0]);
  const auto eps = static_cast<float>(n.attrs.eps);
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  const int64_t group = n.attrs.group;
  KILN_RETURN_IF_ERROR(CheckVector(n.weights[0], group > 0 ? group : x.cols, n.name));
  if (group > 0) {
    step.run = [=](const RunState& s) {
      RmsNormHeads(ContextOf(s), RowsOf(x.rows, s), x.cols / group, group, Floats(x), x.row_stride, w, eps,
                   Floats(o), o.row_stride);
    };
  } else {
    step.run = [=](const RunState& s) {
      RmsNorm(ContextOf(s), RowsOf(x.rows, s), x.cols, Floats(x), x.row_stride, w, eps, Floats(o), o.row_stride);
    };
  }
  return step;
}

Expected<Step> BindAddRmsNorm(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const float* w = VectorWeight(n.weights[0]);
  const auto eps = static_cast<float>(n.attrs.eps);
  const BoundValue x = ctx.inputs[0], residual = ctx.inputs[1], y = ctx.outputs[0], sum = ctx.outputs[1];
  KILN_RETURN_IF_ERROR(CheckVector(n.weights[0], x.cols, n.name));
  step.run = [=](const RunState& s) {
    AddRmsNorm(ContextOf(s), RowsOf(x.rows, s), x.cols, Floats(x), x.row_stride, Floats(residual),
               residual.row_stride, Floats(sum), sum.row_stride, w, eps, Floats(y), y.row_stride);
  };
  return step;
}

}  // namespace kiln::cpu
