// Ops that move or convert whole rows: select_rows (the rows whose logits
// are wanted), cast (a dtype conversion) and transfer (a copy between
// memory domains, here within host memory; to the caller's logits when it
// writes the graph output).
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/convert.h"
#include "backend/cpu/kernels/row_copy.h"

namespace kiln::cpu {

Expected<Step> BindSelectRows(const BindContext& ctx, BindCaches&, Step step) {
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  const size_t row_bytes = static_cast<size_t>(x.cols) * sizeof(float);
  step.run = [=](const RunState& s) {
    // Output rows were validated against the batch by Forward.
    GatherRows(s.batch->num_output_rows, s.batch->output_rows, row_bytes, x.data,
               static_cast<size_t>(x.row_stride) * sizeof(float), o.data,
               static_cast<size_t>(o.row_stride) * sizeof(float));
  };
  return step;
}

Expected<Step> BindCast(const BindContext& ctx, BindCaches&, Step step) {
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  step.run = [=](const RunState& s) {
    (void)ConvertRows(ContextOf(s), RowsOf(x.rows, s), x.cols, x.dtype, x.data, x.row_stride, o.dtype, o.data,
                      o.row_stride);
  };
  return step;
}

Expected<Step> BindTransfer(const BindContext& ctx, BindCaches&, Step step) {
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  const size_t row_bytes = static_cast<size_t>(DTypeBytes(x.dtype, static_cast<uint64_t>(x.cols)).value_or(0));
  step.run = [=](const RunState& s) {
    const size_t elem = row_bytes / static_cast<size_t>(x.cols);
    CopyRows(RowsOf(x.rows, s), row_bytes, x.data, static_cast<size_t>(x.row_stride) * elem,
             o.is_output ? static_cast<void*>(s.logits) : o.data, static_cast<size_t>(OutputStride(o, s)) * elem);
  };
  return step;
}

}  // namespace kiln::cpu
