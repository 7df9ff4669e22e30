// all_reduce_sum: the rows of this pass summed over the tensor-parallel
// group, in place in the output after a copy of the input. The kernel has
// no error path of its own, so a failed collective lands in
// RunState::tensor_error and the rest of the pass runs on what is there.
#include <cstring>

#include "backend/collective.h"
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"

namespace kiln::cpu {

Expected<Step> BindAllReduceSum(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  if (x.dtype != DType::kF32 || o.dtype != DType::kF32) {
    return InvalidArgument("{}: all_reduce_sum sums f32 rows, not {} into {}", n.name, DTypeName(x.dtype),
                           DTypeName(o.dtype));
  }
  if (x.cols != o.cols) return InvalidArgument("{}: {} columns in, {} out", n.name, x.cols, o.cols);
  step.run = [=](const RunState& s) {
    if (s.tensor_error != nullptr && !s.tensor_error->ok()) return;  // the group already failed this pass
    const int64_t rows = RowsOf(x.rows, s);
    float* out = Floats(o);
    for (int64_t r = 0; r < rows; ++r) {
      if (Floats(x) + r * x.row_stride != out + r * o.row_stride) {
        std::memcpy(out + r * o.row_stride, Floats(x) + r * x.row_stride, static_cast<size_t>(x.cols) * 4);
      }
    }
    Status st;
    if (s.collective == nullptr) {
      st = Internal("{}: a tensor-parallel graph run without its group", n.name);
    } else if (o.row_stride == o.cols) {
      st = s.collective->AllReduceSum(out, rows * o.cols);
    } else {
      for (int64_t r = 0; r < rows && st.ok(); ++r) st = s.collective->AllReduceSum(out + r * o.row_stride, o.cols);
    }
    if (!st.ok() && s.tensor_error != nullptr && s.tensor_error->ok()) *s.tensor_error = st.WithContext(n.name);
  };
  return step;
}

}  // namespace kiln::cpu
