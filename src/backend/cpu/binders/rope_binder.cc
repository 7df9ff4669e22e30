// rope: the input copied to the output, then rotated there in place with
// the table of the node's "rope.*" attributes (the kernel copies each token
// on the thread that rotates it).
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/rope.h"
#include "backend/cpu/kernels/row_copy.h"
#include "graph/rope_attributes.h"

namespace kiln::cpu {

Expected<Step> BindRope(const BindContext& ctx, BindCaches& caches, Step step) {
  const Node& n = *ctx.node;
  auto params = RopeAttributes(n.named_attrs);
  if (!params.ok()) return params.status().WithContext(n.name);
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const RopeTable> table,
                        caches.rope_tables.Get(n.attrs.head_dim, *params, ctx.max_positions));
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  const int64_t heads = n.attrs.n_heads;
  const RopeStyle style = n.attrs.rope_style;
  // The kernel copies a token's heads; columns beyond them the binder does.
  const bool whole_rows = x.cols == heads * table->head_dim();
  step.run = [=](const RunState& s) {
    const int64_t rows = RowsOf(x.rows, s);
    if (x.data == o.data) {
      ApplyRope(ContextOf(s), *table, style, rows, s.batch->positions, heads, Floats(o), o.row_stride);
    } else if (!whole_rows) {
      CopyRows(rows, static_cast<size_t>(x.cols) * sizeof(float), x.data,
               static_cast<size_t>(x.row_stride) * sizeof(float), o.data,
               static_cast<size_t>(o.row_stride) * sizeof(float));
      ApplyRope(ContextOf(s), *table, style, rows, s.batch->positions, heads, Floats(o), o.row_stride);
    } else {
      ApplyRope(ContextOf(s), *table, style, rows, s.batch->positions, heads, Floats(x), x.row_stride,
                Floats(o), o.row_stride);
    }
  };
  return step;
}

}  // namespace kiln::cpu
