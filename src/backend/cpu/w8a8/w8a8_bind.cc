// Binding linear nodes to the int8 GEMM.
#include "backend/cpu/w8a8/w8a8_bind.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/activation.h"
#include "format/weight_store.h"

namespace kiln::cpu {

bool W8A8Applies(const Weight& w) {
  return w.shape.size() == 2 && w.name.rfind("model.layers.", 0) == 0;
}

std::string W8A8Matrix::layout() const {
  return input_clip_ > 0 ? fmt::format("w8a8-int8-panel16 (static clip {:g})", input_clip_)
                         : std::string("w8a8-int8-panel16 (dynamic)");
}

Expected<std::shared_ptr<const PackedMatrix>> PackW8A8Matrix(const Weight& w, float input_clip) {
  if (w.shape.size() != 2) return InvalidArgument("{}: W8A8 takes matrices, not shape of rank {}", w.name, w.shape.size());
  auto packed = PackInt8Weight(w.dtype, w.data, w.shape[0], w.shape[1]);
  if (!packed.ok()) return packed.status().WithContext(w.name);
  if (!(input_clip >= 0) || !std::isfinite(input_clip)) {
    return InvalidArgument("{}: activation clip {} is not a finite non-negative number", w.name, input_clip);
  }
  return std::shared_ptr<const PackedMatrix>(std::make_shared<W8A8Matrix>(std::move(packed).value(), input_clip));
}

const W8A8Matrix* AsW8A8(const PackedMatrix* m) { return dynamic_cast<const W8A8Matrix*>(m); }

bool IsW8A8Node(const BindContext& ctx) {
  const Node& n = *ctx.node;
  if (n.op != OpKind::kLinear && n.op != OpKind::kGateUpSiluMul) return false;
  const size_t mats = n.weights.size() / 2;
  if (mats == 0 || ctx.packed.size() < mats) return false;
  for (size_t j = 0; j < mats; ++j) {
    if (AsW8A8(ctx.packed[j]) == nullptr) return false;
  }
  return true;
}

Expected<Step> BindW8A8Linear(const BindContext& ctx, Step step) {
  const Node& n = *ctx.node;
  if (!IsW8A8Node(ctx)) return Internal("{}: not every weight is W8A8-packed", n.name);
  const size_t mats = n.weights.size() / 2;
  std::vector<const Int8Weight*> ws;
  std::vector<const float*> biases;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  float clip = 0;
  for (size_t j = 0; j < mats; ++j) {
    const W8A8Matrix* m = AsW8A8(ctx.packed[j]);
    const Weight* bias = n.weights[mats + j];
    if (bias != nullptr && (bias->dtype != DType::kF32 || bias->num_elements() != m->weight().rows())) {
      return InvalidArgument("{}: bias {} should be {} f32 values", n.name, bias->name, m->weight().rows());
    }
    ws.push_back(&m->weight());
    biases.push_back(bias == nullptr ? nullptr : reinterpret_cast<const float*>(bias->data));
    offsets.push_back(total);
    total += m->weight().rows();
    clip = std::max(clip, m->input_clip());
  }
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  if (ws[0]->cols() != x.cols) {
    return InvalidArgument("{}: weight has {} inputs, activation has {}", n.name, ws[0]->cols(), x.cols);
  }
  for (const Int8Weight* w : ws) {
    if (w->cols() != ws[0]->cols()) return InvalidArgument("{}: weights disagree on the input width", n.name);
  }
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
    return Unsupported("{}: W8A8 linear takes f32 or bf16 inputs, got {}", n.name, DTypeName(x.dtype));
  }
  const bool bf16_in = x.dtype == DType::kBF16;
  const ActivationQuantization quantization{clip};
  auto quantize = [=](const KernelContext& k, int64_t rows) {
    const float* xf = bf16_in ? nullptr : reinterpret_cast<const float*>(x.data);
    const uint16_t* xb = bf16_in ? reinterpret_cast<const uint16_t*>(x.data) : nullptr;
    return QuantizeActivations(BestInt8Kernel(k.isa), k, rows, xf, xb, x.row_stride, x.cols, quantization);
  };

  if (n.op == OpKind::kLinear) {
    if (total != o.cols) return InvalidArgument("{}: weights give {} outputs, value has {}", n.name, total, o.cols);
    step.run = [=](const RunState& s) {
      const KernelContext k = ContextOf(s);
      const Int8Activations xq = quantize(k, RowsOf(x.rows, s));
      float* y = OutputFloats(o, s);
      const int64_t ldy = OutputStride(o, s);
      for (size_t j = 0; j < ws.size(); ++j) Int8Gemm(k, xq, *ws[j], biases[j], y + offsets[j], ldy);
    };
    return step;
  }
  if (mats != 2 || ws[0]->rows() != o.cols || ws[1]->rows() != o.cols) {
    return InvalidArgument("{}: gate/up weights do not match the output width {}", n.name, o.cols);
  }
  if (ctx.scratch == nullptr) return Internal("{}: no scratch for gate and up", n.name);
  auto* scratch = reinterpret_cast<float*>(ctx.scratch);
  const int64_t width = o.cols;
  step.run = [=](const RunState& s) {
    const KernelContext k = ContextOf(s);
    const int64_t rows = RowsOf(x.rows, s);
    const Int8Activations xq = quantize(k, rows);
    Int8Gemm(k, xq, *ws[0], nullptr, scratch, 2 * width);
    Int8Gemm(k, xq, *ws[1], nullptr, scratch + width, 2 * width);
    SiluMul(k, rows, width, scratch, 2 * width, scratch + width, 2 * width, Floats(o), o.row_stride);
  };
  return step;
}

}  // namespace kiln::cpu
