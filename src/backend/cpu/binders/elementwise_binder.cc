// The elementwise ops and row softmax: silu, gelu, softcap and softmax of
// one input; silu_mul, gelu_mul, add and mul of two.
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/kernels/elementwise.h"
#include "backend/cpu/kernels/silu.h"
#include "backend/cpu/kernels/softcap.h"
#include "backend/cpu/kernels/softmax.h"

namespace kiln::cpu {

Expected<Step> BindUnary(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  switch (n.op) {
    case OpKind::kSilu:
      step.run = [=](const RunState& s) {
        Silu(ContextOf(s), RowsOf(x.rows, s), x.cols, Floats(x), x.row_stride, Floats(o), o.row_stride);
      };
      return step;
    case OpKind::kGelu: {
      const GeluForm form = n.attrs.gelu_tanh ? GeluForm::kTanh : GeluForm::kErf;
      step.run = [=](const RunState& s) {
        Gelu(ContextOf(s), form, RowsOf(x.rows, s), x.cols, Floats(x), x.row_stride, Floats(o), o.row_stride);
      };
      return step;
    }
    case OpKind::kSoftcap: {
      const auto cap = static_cast<float>(n.attrs.softcap);
      if (!(cap > 0)) return InvalidArgument("{}: soft cap {} is not positive", n.name, n.attrs.softcap);
      // Gemma 2's capped logits are the graph's output.
      step.run = [=](const RunState& s) {
        SoftCap(ContextOf(s), RowsOf(x.rows, s), x.cols, Floats(x), x.row_stride, 1.0f, cap, OutputFloats(o, s),
                OutputStride(o, s));
      };
      return step;
    }
    case OpKind::kSoftmax:
      step.run = [=](const RunState& s) {
        Softmax(ContextOf(s), RowsOf(x.rows, s), x.cols, Floats(x), x.row_stride, 1.0f, Floats(o), o.row_stride);
      };
      return step;
    default: return Internal("{}: {} is not a one-input elementwise op", n.name, OpName(n.op));
  }
}

Expected<Step> BindBinary(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const BoundValue a = ctx.inputs[0], b = ctx.inputs[1], o = ctx.outputs[0];
  const GeluForm form = n.attrs.gelu_tanh ? GeluForm::kTanh : GeluForm::kErf;
  switch (n.op) {
    case OpKind::kSiluMul:
      step.run = [=](const RunState& s) {
        SiluMul(ContextOf(s), RowsOf(a.rows, s), a.cols, Floats(a), a.row_stride, Floats(b), b.row_stride, Floats(o),
                o.row_stride);
      };
      return step;
    case OpKind::kGeluMul:
      step.run = [=](const RunState& s) {
        GeluMul(ContextOf(s), form, RowsOf(a.rows, s), a.cols, Floats(a), a.row_stride, Floats(b), b.row_stride,
                Floats(o), o.row_stride);
      };
      return step;
    case OpKind::kAdd:
      step.run = [=](const RunState& s) {
        Add(ContextOf(s), RowsOf(a.rows, s), a.cols, Floats(a), a.row_stride, Floats(b), b.row_stride, Floats(o),
            o.row_stride);
      };
      return step;
    case OpKind::kMul:
      step.run = [=](const RunState& s) {
        Mul(ContextOf(s), RowsOf(a.rows, s), a.cols, Floats(a), a.row_stride, Floats(b), b.row_stride, Floats(o),
            o.row_stride);
      };
      return step;
    default: return Internal("{}: {} is not a two-input elementwise op", n.name, OpName(n.op));
  }
}

}  // namespace kiln::cpu
