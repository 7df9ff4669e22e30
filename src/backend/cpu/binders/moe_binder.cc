// moe: a mixture of experts' SwiGLU MLPs. Per step: the router's logits
// for every row, each row's top-k experts (kernels/expert_routing), the rows
// grouped by expert; then each chosen expert runs once on the rows that
// chose it (gathered into scratch) with the linear kernels of its weights'
// packing, float panels or block-quantized rows, and its outputs are added
// into their rows, weighted. A row's experts are added in expert order and
// each kernel's row depends on that row only, so a row's result is the same
// whatever rows it is batched with. Experts no row chose are not read.
//
// With few rows (decoding) and block-quantized experts, the chosen experts
// run together instead: the rows are quantized once, every chosen expert's
// gate and up matrices are one split of work over the threads, then their
// down matrices another, so that a layer pays two waits for the threads
// where it paid three per expert. The bits are the same: each output still
// depends on its activation row and weight row only.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
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

// Below this many rows a step runs its chosen experts together (see above).
constexpr int64_t kJointRows = 16;

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

// Bytes of `rows` quantized activation rows of k values in blocks of `block`
// laid out as QuantizedRows: values, then scales, then sums of 16.
int64_t QuantizedRowsBytes(int64_t rows, int64_t k, int block) {
  auto align = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  return align(rows * k) + align(rows * (k / block) * 4) + align(rows * (k / 16) * 2);
}

// Rows [first, first + count) of x, as rows of their own.
QuantizedRows RowRange(const QuantizedRows& x, int64_t first, int64_t count) {
  QuantizedRows r;
  r.q = x.q + first * x.k;
  r.d = x.d + first * (x.k / x.block);
  r.sums = x.sums + first * (x.k / 16);
  r.k = x.k;
  r.block = x.block;
  r.rows = count;
  return r;
}

// `rows` rows laid out as QuantizedRowsBytes counts them, at `bytes`.
QuantizedRows RowsIn(uint8_t* bytes, int64_t rows, int64_t k, int block) {
  auto align = [](int64_t n) { return (n + 63) / 64 * 64; };
  QuantizedRows r;
  r.q = reinterpret_cast<int8_t*>(bytes);
  r.d = reinterpret_cast<float*>(bytes + align(rows * k));
  r.sums = reinterpret_cast<int16_t*>(bytes + align(rows * k) + align(rows * (k / block) * 4));
  r.k = k;
  r.block = block;
  r.rows = rows;
  return r;
}

// Row m of `from` into row i of `to` (the same k and block).
void CopyRow(const QuantizedRows& from, int64_t m, const QuantizedRows& to, int64_t i) {
  std::memcpy(to.q + i * to.k, from.row_q(m), static_cast<size_t>(to.k));
  std::memcpy(to.d + i * (to.k / to.block), from.row_d(m), static_cast<size_t>(to.k / to.block) * sizeof(float));
  std::memcpy(to.sums + i * (to.k / 16), from.row_sums(m), static_cast<size_t>(to.k / 16) * sizeof(int16_t));
}

// Scratch, in floats (int32 entries take one each), for `rows` rows.
struct MoeScratch {
  int64_t logits, expert, weight, offset, row, row_weight, gathered, gate_up, down, shared_gate;
  // The experts run together: each (row, chosen expert) pair's quantized
  // input, gate and up side by side, and down output, in expert order.
  int64_t joint_input, joint_gate_up, joint_down;
  int64_t total;

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
    const int64_t pairs = std::min(rows, kJointRows - 1) * s.k;
    joint_input = take((QuantizedRowsBytes(pairs, s.hidden, 32) + 3) / 4);  // 32: the smaller block, the more bytes
    joint_gate_up = take(pairs * 2 * s.width);
    joint_down = take(pairs * s.hidden);
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
  // Together only where every expert is block-quantized, their gate and up
  // matrices with one activation block and their down ones with one.
  bool joint = true;
  for (const Matrix& m : experts) joint = joint && m.quant != nullptr;
  const int up_block = joint ? experts[0].quant->activation_block() : 0;
  const int down_block = joint ? experts[2].quant->activation_block() : 0;
  for (size_t i = 0; joint && i < experts.size(); ++i) {
    joint = experts[i].quant->activation_block() == (i % 3 == 2 ? down_block : up_block);
  }
  const MoeScratch layout(shape, ctx.capacity.Rows(x.rows));
  auto* scratch = reinterpret_cast<float*>(ctx.scratch);
  const bool normalize = n.attrs.normalize_expert_weights;
  // The joint path's lists, reused from step to step.
  auto joint_views = std::make_shared<std::vector<QuantizedRows>>();
  auto joint_jobs = std::make_shared<std::vector<QuantLinearJob>>();
  joint_views->reserve(static_cast<size_t>(std::min(E, (kJointRows - 1) * K)));
  joint_jobs->reserve(static_cast<size_t>(2 * std::min(E, (kJointRows - 1) * K)));
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
    // An expert's outputs for its rows (src, H apart), weighted into theirs.
    auto add_expert = [&](int32_t first, int32_t count, const float* src) {
      for (int32_t i = 0; i < count; ++i) {
        float* dst = y + row[first + i] * ldy;
        const float w = row_weight[first + i];
        for (int64_t c = 0; c < H; ++c) dst[c] += w * src[i * H + c];
      }
    };
    if (joint && rows < kJointRows) {
      // The rows quantized once, then copied per (row, expert) pair in
      // expert order: pairs [offset[e], offset[e + 1]) are expert e's.
      const int32_t pairs = offset[E];
      const QuantizedRows xq = QuantizeActivations(k, rows, in, false, x.row_stride, H, up_block);
      const QuantizedRows xs = RowsIn(reinterpret_cast<uint8_t*>(scratch + layout.joint_input), pairs, H, up_block);
      for (int32_t i = 0; i < pairs; ++i) CopyRow(xq, row[i], xs, i);
      float* gu = scratch + layout.joint_gate_up;
      float* dn = scratch + layout.joint_down;
      std::vector<QuantizedRows>& views = *joint_views;
      std::vector<QuantLinearJob>& jobs = *joint_jobs;
      // One view per chosen expert of `rows`' pairs (kept alive for the jobs).
      auto view_per_expert = [&](const QuantizedRows& rows) {
        views.clear();
        jobs.clear();
        for (int64_t e = 0; e < E; ++e) {
          const int32_t first = offset[e], count = offset[e + 1] - first;
          if (count > 0) views.push_back(RowRange(rows, first, count));
        }
      };
      view_per_expert(xs);
      for (int64_t e = 0, v = 0; e < E; ++e) {
        const int32_t first = offset[e], count = offset[e + 1] - first;
        if (count == 0) continue;
        const Matrix* w = &experts[static_cast<size_t>(3 * e)];
        jobs.push_back({w[0].quant, &views[static_cast<size_t>(v)], count, gu + first * 2 * F, 2 * F});
        jobs.push_back({w[1].quant, &views[static_cast<size_t>(v)], count, gu + first * 2 * F + F, 2 * F});
        ++v;
      }
      QuantLinearJobs(k, jobs.data(), static_cast<int>(jobs.size()));
      SiluMul(k, pairs, F, gu, 2 * F, gu + F, 2 * F, gu, 2 * F);
      // The down matrices' inputs, all pairs at once (in this thread's
      // scratch, which the rows' quantized copy above no longer needs).
      const QuantizedRows hq = QuantizeActivations(k, pairs, gu, false, 2 * F, F, down_block);
      view_per_expert(hq);
      for (int64_t e = 0, v = 0; e < E; ++e) {
        const int32_t first = offset[e], count = offset[e + 1] - first;
        if (count == 0) continue;
        jobs.push_back({experts[static_cast<size_t>(3 * e + 2)].quant, &views[static_cast<size_t>(v++)], count,
                        dn + first * H, H});
      }
      QuantLinearJobs(k, jobs.data(), static_cast<int>(jobs.size()));
      for (int64_t e = 0; e < E; ++e) {
        const int32_t first = offset[e], count = offset[e + 1] - first;
        if (count > 0) add_expert(first, count, dn + first * H);
      }
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const int32_t first = offset[e], count = offset[e + 1] - first;
        if (count == 0) continue;
        for (int32_t i = 0; i < count; ++i) {
          std::memcpy(gathered + i * H, in + row[first + i] * x.row_stride, static_cast<size_t>(H) * sizeof(float));
        }
        mlp(&experts[static_cast<size_t>(3 * e)], count, gathered, H, F);
        add_expert(first, count, down);
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
