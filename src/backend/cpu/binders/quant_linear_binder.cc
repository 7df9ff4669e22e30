// linear and gate_up_silu_mul on block-quantized weights: the input rows
// are quantized once per step (all the node's weights share the activation
// block size), then each weight's outputs land in their columns.
#include <vector>

#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/cpu_packed_matrix.h"
#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/qkernels/quant_linear.h"

namespace kiln::cpu {
namespace {

// Weights of one fused quantized projection at most (q, k and v).
constexpr size_t kMaxFusedParts = 4;

}  // namespace

Expected<Step> BindQuantLinear(const BindContext& ctx, Step step) {
  const Node& n = *ctx.node;
  const size_t mats = n.weights.size() / 2;
  std::vector<const QuantMatrix*> ws;
  std::vector<const float*> biases;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t j = 0; j < mats; ++j) {
    const BlockQuantMatrix* m = j < ctx.packed.size() ? AsBlockQuant(ctx.packed[j]) : nullptr;
    if (m == nullptr) return Internal("{}: weight {} is not block-quantized like the first", n.name, j);
    const QuantMatrix* w = &m->weight();
    if (j > 0 && w->activation_block() != ws[0]->activation_block()) {
      return Unsupported("{}: weights {} and {} pair with different activation blocks", n.name, 0, j);
    }
    KILN_RETURN_IF_ERROR(CheckVector(n.weights[mats + j], w->rows(), n.name));
    ws.push_back(w);
    biases.push_back(VectorWeight(n.weights[mats + j]));
    offsets.push_back(total);
    total += w->rows();
  }
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  if (ws[0]->cols() != x.cols) {
    return InvalidArgument("{}: weight has {} inputs, activation has {}", n.name, ws[0]->cols(), x.cols);
  }
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
    return Unsupported("{}: quantized linear takes f32 or bf16 inputs, got {}", n.name, DTypeName(x.dtype));
  }
  const bool bf16_in = x.dtype == DType::kBF16;
  const int block = ws[0]->activation_block();
  auto quantize = [=](const KernelContext& k, int64_t rows) {
    return QuantizeActivations(k, rows, x.data, bf16_in, x.row_stride, x.cols, block);
  };
  if (n.op == OpKind::kLinear) {
    if (total != o.cols) return InvalidArgument("{}: weights give {} outputs, value has {}", n.name, total, o.cols);
    if (ws.size() > kMaxFusedParts) return Unsupported("{}: more than {} fused weights", n.name, kMaxFusedParts);
    step.run = [=](const RunState& s) {
      const int64_t rows = RowsOf(x.rows, s);
      const KernelContext k = ContextOf(s);
      const QuantizedRows xq = quantize(k, rows);
      float* y = OutputFloats(o, s);
      QuantLinearPart parts[kMaxFusedParts];
      for (size_t j = 0; j < ws.size(); ++j) parts[j] = {ws[j], biases[j], y + offsets[j]};
      QuantLinearParts(k, rows, xq, parts, static_cast<int>(ws.size()), OutputStride(o, s));
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
    const KernelContext k = ContextOf(s);
    const QuantizedRows xq = quantize(k, rows);
    float* out = Floats(o);
    const int64_t ld_out = o.row_stride;
    const bool chunked = QuantLinearPairedChunks(
        k, rows, xq, *ws[0], *ws[1],
        [&](int64_t col_begin, int64_t cols, const float* gate, const float* up, int64_t ld) {
          SiluMulOnThisThread(k.isa, rows, cols, gate, ld, up, ld, out + col_begin, ld_out);
        });
    if (chunked) return;
    const QuantLinearPart parts[2] = {{ws[0], nullptr, scratch}, {ws[1], nullptr, scratch + width}};
    QuantLinearParts(k, rows, xq, parts, 2, 2 * width);
    SiluMul(k, rows, width, scratch, 2 * width, scratch + width, 2 * width, out, ld_out);
  };
  return step;
}

}  // namespace kiln::cpu
