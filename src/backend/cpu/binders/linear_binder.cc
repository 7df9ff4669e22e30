// linear and gate_up_silu_mul: on block-quantized weights (the quantized
// kernels), on W8A8-packed weights (the int8 GEMM), else on float panels,
// each weight of a fused projection writing its columns of the output.
#include <vector>

#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/cpu_packed_matrix.h"
#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/kernels/linear.h"
#include "backend/cpu/w8a8/w8a8_bind.h"

namespace kiln::cpu {

Expected<Step> BindLinear(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  if (!ctx.packed.empty() && AsBlockQuant(ctx.packed[0]) != nullptr) return BindQuantLinear(ctx, std::move(step));
  if (IsW8A8Node(ctx)) return BindW8A8Linear(ctx, std::move(step));
  const size_t mats = n.weights.size() / 2;
  std::vector<const PackedWeight*> ws;
  std::vector<const float*> biases;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t j = 0; j < mats; ++j) {
    const PanelMatrix* m = j < ctx.packed.size() ? AsPanel(ctx.packed[j]) : nullptr;
    if (m == nullptr) return Internal("{}: weight {} not packed", n.name, j);
    ws.push_back(&m->weight());
    KILN_RETURN_IF_ERROR(CheckVector(n.weights[mats + j], ws.back()->rows(), n.name));
    biases.push_back(VectorWeight(n.weights[mats + j]));
    offsets.push_back(total);
    total += ws.back()->rows();
  }
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  if (ws[0]->cols() != x.cols) {
    return InvalidArgument("{}: weight has {} inputs, activation has {}", n.name, ws[0]->cols(), x.cols);
  }
  const bool bf16_in = x.dtype == DType::kBF16;
  auto linear = [bf16_in, x](const KernelContext& k, int64_t rows, const PackedWeight& w, const float* bias, float* y,
                             int64_t ldy) {
    if (bf16_in) {
      LinearBf16Input(k, rows, reinterpret_cast<const uint16_t*>(x.data), x.row_stride, w, bias, y, ldy);
    } else {
      Linear(k, rows, Floats(x), x.row_stride, w, bias, y, ldy);
    }
  };
  if (n.op == OpKind::kLinear) {
    if (total != o.cols) return InvalidArgument("{}: weights give {} outputs, value has {}", n.name, total, o.cols);
    step.run = [=](const RunState& s) {
      const int64_t rows = RowsOf(x.rows, s);
      float* y = OutputFloats(o, s);
      const int64_t ldy = OutputStride(o, s);
      for (size_t j = 0; j < ws.size(); ++j) linear(ContextOf(s), rows, *ws[j], biases[j], y + offsets[j], ldy);
    };
    return step;
  }
  if (mats != 2 || ws[0]->rows() != o.cols || ws[1]->rows() != o.cols) {
    return InvalidArgument("{}: gate/up weights do not match the output width {}", n.name, o.cols);
  }
  auto* scratch = reinterpret_cast<float*>(ctx.scratch);
  const int64_t width = o.cols;
  step.run = [=](const RunState& s) {
    const int64_t rows = RowsOf(x.rows, s);
    linear(ContextOf(s), rows, *ws[0], nullptr, scratch, 2 * width);
    linear(ContextOf(s), rows, *ws[1], nullptr, scratch + width, 2 * width);
    SiluMul(ContextOf(s), rows, width, scratch, 2 * width, scratch + width, 2 * width, Floats(o), o.row_stride);
  };
  return step;
}

}  // namespace kiln::cpu
