// moe: a mixture of experts' SwiGLU MLPs. Per step: the router's logits
// for every row, each row's top-k experts (kernels/expert_routing), the rows
// grouped by expert; then each chosen expert runs once on the rows that
// chose it (gathered into scratch) with the linear kernels of its weights'
// packing, float panels or block-quantized rows, and its outputs are added
// into their rows, weighted. A row's experts are added in expert order and
// each kernel's row depends on that row only, so a row's result is the same
// whatever rows it is batched with. Experts no row chose are not read.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/cpu_packed_matrix.h"
#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/kernels/expert_routing.h"
#include "backend/cpu/kernels/linear.h"
#include "backend/cpu/qkernels/quant_linear.h"
#include "format/weight_store.h"

namespace kiln::cpu {
namespace {

// One matrix of the mixture as its packing left it.
struct Matrix {
  const PackedWeight* panel = nullptr;
  const QuantMatrix* quant = nullptr;

  int64_t rows() const { return panel != nullptr ? panel->rows() : quant->rows(); }
  int64_t cols() const { return panel != nullptr ? panel->cols() : quant->cols(); }

  // y = x W^T for `n` rows of x (ldx apart) into y (ldy apart).
  void Apply(const KernelContext& k, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy) const {
    if (panel != nullptr) {
      Linear(k, n, x, ldx, *panel, nullptr, y, ldy);
      return;
    }
    const QuantizedRows xq = QuantizeActivations(k, n, x, false, ldx, quant->cols(), quant->activation_block());
    const QuantLinearPart part{quant, nullptr, y};
    QuantLinearParts(k, n, xq, &part, 1, ldy);
  }
};

Expected<Matrix> MatrixOf(const BindContext& ctx, size_t i, int64_t rows, int64_t cols) {
  const Node& n = *ctx.node;
  const PackedMatrix* p = i < ctx.packed.size() ? ctx.packed[i] : nullptr;
  Matrix m;
  if (const PanelMatrix* panel = AsPanel(p)) m.panel = &panel->weight();
  if (const BlockQuantMatrix* quant = AsBlockQuant(p)) m.quant = &quant->weight();
  if (m.panel == nullptr && m.quant == nullptr) {
    return Internal("{}: weight {} is not packed as float panels or quantized rows", n.name,
                    n.weights[i] != nullptr ? n.weights[i]->name : "?");
  }
  if (m.rows() != rows || m.cols() != cols) {
    return InvalidArgument("{}: weight {} is [{}, {}], expected [{}, {}]", n.name, n.weights[i]->name, m.rows(),
                           m.cols(), rows, cols);
  }
  return m;
}

// The mixture's shape, from its weights.
struct MoeShape {
  int64_t experts = 0, k = 0, hidden = 0, width = 0, shared_width = 0;

  // The widest MLP (an expert's or the shared one's).
  int64_t MaxWidth() const { return std::max(width, shared_width); }
};

MoeShape ShapeOfMoe(const Graph& g, const Node& n) {
  MoeShape s;
  s.experts = moe_weights::ExpertCount(n);
  s.k = n.attrs.experts_per_token;
  s.hidden = g.value(n.outputs[0]).cols;
  const Weight* gate = s.experts > 0 ? n.weights[moe_weights::Expert(0, moe_weights::kGate)] : nullptr;
  s.width = gate != nullptr && gate->shape.size() == 2 ? gate->shape[0] : 0;
  const Weight* shared = s.experts > 0 ? n.weights[moe_weights::Shared(n, moe_weights::kGate)] : nullptr;
  s.shared_width = shared != nullptr && shared->shape.size() == 2 ? shared->shape[0] : 0;
  return s;
}

// Scratch, in floats (int32 entries take one each), for `rows` rows.
struct MoeScratch {
  int64_t logits, expert, weight, offset, row, row_weight, gathered, gate_up, down, shared_gate, total;

  MoeScratch(const MoeShape& s, int64_t rows) {
    auto align = [](int64_t floats) { return (floats + 15) / 16 * 16; };  // 64-byte starts
    int64_t at = 0;
    auto take = [&](int64_t floats) {
      int64_t start = at;
      at += align(std::max<int64_t>(floats, 1));
      return start;
    };
    logits = take(rows * s.experts);
    expert = take(rows * s.k);
    weight = take(rows * s.k);
    offset = take(s.experts + 1);
    row = take(rows * s.k);
    row_weight = take(rows * s.k);
    gathered = take(rows * s.hidden);
    gate_up = take(rows * 2 * s.MaxWidth());
    down = take(rows * s.hidden);
    shared_gate = take(rows);
    total = at;
  }
};

}  // namespace

size_t MoeScratchBytes(const Graph& g, const Node& n, int64_t rows) {
  return static_cast<size_t>(MoeScratch(ShapeOfMoe(g, n), rows).total) * sizeof(float);
}

Expected<Step> BindMoe(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const MoeShape shape = ShapeOfMoe(*ctx.graph, n);
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  if (shape.experts <= 0 || shape.width <= 0) return InvalidArgument("{}: a mixture without experts", n.name);
  if (shape.k <= 0 || shape.k > shape.experts) {
    return InvalidArgument("{}: {} experts per row out of {}", n.name, shape.k, shape.experts);
  }
  if (x.cols != shape.hidden || x.dtype != DType::kF32) {
    return InvalidArgument("{}: input of {} {} columns, expected {} f32", n.name, x.cols, DTypeName(x.dtype),
                           shape.hidden);
  }
  const int64_t H = shape.hidden, F = shape.width, SF = shape.shared_width, E = shape.experts, K = shape.k;
  KILN_ASSIGN_OR_RETURN(Matrix router, MatrixOf(ctx, moe_weights::kRouter, E, H));
  std::vector<Matrix> experts;
  for (int64_t e = 0; e < E; ++e) {
    KILN_ASSIGN_OR_RETURN(Matrix gate, MatrixOf(ctx, moe_weights::Expert(e, moe_weights::kGate), F, H));
    KILN_ASSIGN_OR_RETURN(Matrix up, MatrixOf(ctx, moe_weights::Expert(e, moe_weights::kUp), F, H));
    KILN_ASSIGN_OR_RETURN(Matrix down, MatrixOf(ctx, moe_weights::Expert(e, moe_weights::kDown), H, F));
    experts.insert(experts.end(), {gate, up, down});
  }
  std::vector<Matrix> shared;
  if (SF > 0) {
    KILN_ASSIGN_OR_RETURN(Matrix gate, MatrixOf(ctx, moe_weights::Shared(n, moe_weights::kGate), SF, H));
    KILN_ASSIGN_OR_RETURN(Matrix up, MatrixOf(ctx, moe_weights::Shared(n, moe_weights::kUp), SF, H));
    KILN_ASSIGN_OR_RETURN(Matrix down, MatrixOf(ctx, moe_weights::Shared(n, moe_weights::kDown), H, SF));
    KILN_ASSIGN_OR_RETURN(Matrix scale, MatrixOf(ctx, moe_weights::Shared(n, moe_weights::kSharedGate), 1, H));
    shared = {gate, up, down, scale};
  }
  const MoeScratch layout(shape, ctx.capacity.Rows(x.rows));
  auto* scratch = reinterpret_cast<float*>(ctx.scratch);
  const bool normalize = n.attrs.normalize_expert_weights;
  step.run = [=, experts = std::move(experts), shared = std::move(shared)](const RunState& s) {
    const int64_t rows = RowsOf(x.rows, s);
    const KernelContext k = ContextOf(s);
    const float* in = Floats(x);
    float* y = OutputFloats(o, s);
    const int64_t ldy = OutputStride(o, s);
    float* logits = scratch + layout.logits;
    auto* expert = reinterpret_cast<int32_t*>(scratch + layout.expert);
    float* weight = scratch + layout.weight;
    auto* offset = reinterpret_cast<int32_t*>(scratch + layout.offset);
    auto* row = reinterpret_cast<int32_t*>(scratch + layout.row);
    float* row_weight = scratch + layout.row_weight;
    float* gathered = scratch + layout.gathered;
    float* gate_up = scratch + layout.gate_up;
    float* down = scratch + layout.down;

    router.Apply(k, rows, in, x.row_stride, logits, E);
    RouteRows(logits, rows, E, E, K, normalize, expert, weight);
    GroupByExpert(expert, weight, rows, K, E, offset, row, row_weight);
    for (int64_t m = 0; m < rows; ++m) std::memset(y + m * ldy, 0, static_cast<size_t>(H) * sizeof(float));

    // gate/up side by side, silu(gate) * up in the gate half, then down.
    auto mlp = [&](const Matrix* w, int64_t n_rows, const float* xs, int64_t ldx, int64_t width) {
      w[0].Apply(k, n_rows, xs, ldx, gate_up, 2 * width);
      w[1].Apply(k, n_rows, xs, ldx, gate_up + width, 2 * width);
      SiluMul(k, n_rows, width, gate_up, 2 * width, gate_up + width, 2 * width, gate_up, 2 * width);
      w[2].Apply(k, n_rows, gate_up, 2 * width, down, H);
    };
    for (int64_t e = 0; e < E; ++e) {
      const int32_t first = offset[e], count = offset[e + 1] - first;
      if (count == 0) continue;
      for (int32_t i = 0; i < count; ++i) {
        std::memcpy(gathered + i * H, in + row[first + i] * x.row_stride, static_cast<size_t>(H) * sizeof(float));
      }
      mlp(&experts[static_cast<size_t>(3 * e)], count, gathered, H, F);
      for (int32_t i = 0; i < count; ++i) {
        float* dst = y + row[first + i] * ldy;
        const float* src = down + i * H;
        const float w = row_weight[first + i];
        for (int64_t c = 0; c < H; ++c) dst[c] += w * src[c];
      }
    }
    if (!shared.empty()) {
      float* gate = scratch + layout.shared_gate;
      shared[3].Apply(k, rows, in, x.row_stride, gate, 1);
      mlp(shared.data(), rows, in, x.row_stride, SF);
      for (int64_t m = 0; m < rows; ++m) {
        const float scale = 1.0f / (1.0f + std::exp(-gate[m]));
        float* dst = y + m * ldy;
        const float* src = down + m * H;
        for (int64_t c = 0; c < H; ++c) dst[c] += scale * src[c];
      }
    }
  };
  return step;
}

}  // namespace kiln::cpu
