// The CPU backend's support list, weight packing and binding: each op
// becomes a closure over its buffers that calls the CPU kernels.
#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/kernels/convert.h"
#include "backend/cpu/kernels/elementwise.h"
#include "backend/cpu/kernels/embedding.h"
#include "backend/cpu/kernels/kv_cache.h"
#include "backend/cpu/kernels/linear.h"
#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "backend/cpu/kernels/paged_attention.h"
#include "backend/cpu/kernels/rms_norm.h"
#include "backend/cpu/kernels/rope.h"
#include "backend/cpu/kernels/softmax.h"
#include "backend/cpu/qkernels/quant_linear.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "backend/cpu/w8a8/w8a8_bind.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

using cpu::KernelContext;

class CpuPackedMatrix : public PackedMatrix {
 public:
  explicit CpuPackedMatrix(cpu::PackedWeight w) : w_(std::move(w)) {}
  std::string layout() const override { return fmt::format("panel16-{}", DTypeName(w_.dtype())); }
  size_t bytes() const override { return w_.bytes(); }
  const cpu::PackedWeight& weight() const { return w_; }

 private:
  cpu::PackedWeight w_;
};

// A block-quantized matrix: the file's bytes read in place by the quantized
// kernels, or (Q8_0, Q4_0) a copy repacked for them at load.
class CpuQuantMatrix : public PackedMatrix {
 public:
  explicit CpuQuantMatrix(cpu::QuantMatrix w) : w_(std::move(w)) {}
  std::string layout() const override { return w_.layout(); }
  size_t bytes() const override { return w_.kernel_bytes(); }
  bool in_place() const override { return w_.x8() == nullptr; }
  const cpu::QuantMatrix& weight() const { return w_; }

 private:
  cpu::QuantMatrix w_;
};

const cpu::PackedWeight& Packed(const PackedMatrix* m) { return static_cast<const CpuPackedMatrix*>(m)->weight(); }

// The quantized form of a packed weight, or null when it is a float panel.
const cpu::QuantMatrix* QuantPacked(const PackedMatrix* m) {
  auto* q = dynamic_cast<const CpuQuantMatrix*>(m);
  return q == nullptr ? nullptr : &q->weight();
}

KernelContext Kc(const RunState& s) {
  KernelContext k;
  k.pool = s.pool;
  return k;
}

// Rows of a value in this pass.
int64_t RowsOf(RowSpace r, const RunState& s) {
  switch (r) {
    case RowSpace::kTokens: return s.batch->num_tokens;
    case RowSpace::kOutputRows: return s.batch->num_output_rows;
    case RowSpace::kContextRows: return s.context_rows;
    case RowSpace::kScoreRows: return s.score_rows;
    case RowSpace::kNone: return 0;
  }
  return 0;
}

float* F(const BoundValue& v) { return reinterpret_cast<float*>(v.data); }

// Where an output lands: the arena, or the caller's logits.
float* OutPtr(const BoundValue& v, const RunState& s) { return v.is_output ? s.logits : F(v); }
int64_t OutStride(const BoundValue& v, const RunState& s) { return v.is_output ? s.logits_stride : v.row_stride; }

const float* VectorWeight(const Weight* w) {
  return w == nullptr ? nullptr : reinterpret_cast<const float*>(w->data);
}

cpu::KvCacheView KvView(const RunState& s, int64_t layer) {
  const KvCacheLayout& l = s.kv_cache->layout();
  cpu::KvCacheView v;
  v.dtype = l.dtype;
  v.k = s.kv_cache->keys(layer);
  v.v = s.kv_cache->values(layer);
  v.k_scale = s.kv_cache->key_scales(layer);
  v.v_scale = s.kv_cache->value_scales(layer);
  v.num_blocks = static_cast<int32_t>(l.num_blocks);
  v.block_size = static_cast<int32_t>(l.block_size);
  v.kv_heads = static_cast<int32_t>(l.num_kv_heads);
  v.head_dim = static_cast<int32_t>(l.head_dim);
  return v;
}

void CopyRows(int64_t rows, size_t row_bytes, const uint8_t* src, size_t src_stride, uint8_t* dst,
              size_t dst_stride) {
  if (src == dst) return;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + static_cast<size_t>(r) * dst_stride, src + static_cast<size_t>(r) * src_stride, row_bytes);
  }
}

SupportEntry Everything(OpKind op) {
  SupportEntry e;
  e.op = op;
  e.activation_dtypes = {DType::kF32, DType::kBF16};
  return e;
}

// Norm weights and biases must be fp32 vectors (the WeightStore converts
// 16-bit vectors at load).
Status CheckVector(const Weight* w, int64_t n, const std::string& node) {
  if (w == nullptr) return Status::Ok();
  if (w->dtype != DType::kF32) {
    return Unsupported("{}: vector weight {} is {}, the CPU kernels read f32 vectors", node, w->name,
                       DTypeName(w->dtype));
  }
  if (w->num_elements() != n) {
    return InvalidArgument("{}: vector weight {} has {} elements, expected {}", node, w->name, w->num_elements(), n);
  }
  return Status::Ok();
}

// Weights of one fused quantized projection at most (q, k and v).
constexpr size_t kMaxFusedParts = 4;

// Linear and gate_up_silu_mul on block-quantized weights: the input rows are
// quantized once per step (all the node's weights share the activation
// block size), then each weight's outputs land in their columns.
Expected<Step> BindQuantLinear(const BindContext& ctx, Step step) {
  const Node& n = *ctx.node;
  const size_t mats = n.weights.size() / 2;
  std::vector<const cpu::QuantMatrix*> ws;
  std::vector<const float*> biases;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t j = 0; j < mats; ++j) {
    const cpu::QuantMatrix* w = j < ctx.packed.size() ? QuantPacked(ctx.packed[j]) : nullptr;
    if (w == nullptr) return Internal("{}: weight {} is not block-quantized like the first", n.name, j);
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
    return cpu::QuantizeActivations(k, rows, x.data, bf16_in, x.row_stride, x.cols, block);
  };
  if (n.op == OpKind::kLinear) {
    if (total != o.cols) return InvalidArgument("{}: weights give {} outputs, value has {}", n.name, total, o.cols);
    if (ws.size() > kMaxFusedParts) return Unsupported("{}: more than {} fused weights", n.name, kMaxFusedParts);
    step.run = [=](const RunState& s) {
      const int64_t rows = RowsOf(x.rows, s);
      const KernelContext k = Kc(s);
      const cpu::QuantizedRows xq = quantize(k, rows);
      float* y = OutPtr(o, s);
      cpu::QuantLinearPart parts[kMaxFusedParts];
      for (size_t j = 0; j < ws.size(); ++j) parts[j] = {ws[j], biases[j], y + offsets[j]};
      cpu::QuantLinearParts(k, rows, xq, parts, static_cast<int>(ws.size()), OutStride(o, s));
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
    const KernelContext k = Kc(s);
    const cpu::QuantizedRows xq = quantize(k, rows);
    const cpu::QuantLinearPart parts[2] = {{ws[0], nullptr, scratch}, {ws[1], nullptr, scratch + width}};
    cpu::QuantLinearParts(k, rows, xq, parts, 2, 2 * width);
    cpu::SiluMul(k, rows, width, scratch, 2 * width, scratch + width, 2 * width, F(o), o.row_stride);
  };
  return step;
}

}  // namespace

CpuBackend::CpuBackend() {
  const std::vector<DType>& quantized = cpu::QuantKernelTypes();
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto op = static_cast<OpKind>(i);
    SupportEntry e = Everything(op);
    if (op == OpKind::kEmbedding) {
      // Rows of any of these, quantized ones decoded one row at a time.
      e.weight_dtypes = {DType::kF32, DType::kF16, DType::kBF16};
      e.weight_dtypes.insert(e.weight_dtypes.end(), quantized.begin(), quantized.end());
      e.weight_layout = "rows";
    }
    if (op == OpKind::kLinear || op == OpKind::kGateUpSiluMul) {
      e.weight_dtypes = {DType::kF32, DType::kF16, DType::kBF16};
      e.weight_layout = "panel16";
      // Block-quantized weights: the file's rows in place, int8 activations.
      SupportEntry q = Everything(op);
      q.weight_dtypes = quantized;
      q.weight_layout = "gguf-rows";
      q.note = "int8 activations";
      support_.Add(std::move(e));
      support_.Add(std::move(q));
      continue;
    }
    support_.Add(std::move(e));
  }
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::description() const {
  return fmt::format("host CPU ({}), {} kernels", GetCpuInfo().Summary(), GetCpuInfo().BestIsa());
}

bool CpuBackend::has_native_bf16_dot() const { return GetCpuInfo().avx512_bf16; }

Expected<std::shared_ptr<const PackedMatrix>> CpuBackend::PackWeight(const PackRequest& request) {
  if (request.weight == nullptr) return InvalidArgument("cpu backend: a pack request without a weight");
  const Weight& w = *request.weight;
  if (w.shape.size() != 2) return InvalidArgument("{}: not a matrix", w.name);
  const bool matmul =
      request.node != nullptr && (request.node->op == OpKind::kLinear || request.node->op == OpKind::kGateUpSiluMul);
  if (request.int8 && matmul && cpu::W8A8Applies(w)) return cpu::PackW8A8Matrix(w, request.activation_clip);
  if (IsQuantized(w.dtype)) {
    auto q = cpu::MakeQuantMatrix(w.dtype, w.data, w.nbytes, w.shape[0], w.shape[1]);
    if (!q.ok()) return q.status().WithContext(w.name);
    // Where the vector kernels run, they read a repacked copy: one stream
    // per row group, in huge pages (see bench/RESULTS.md for the gain).
    if (cpu::BestIsa() != cpu::Isa::kScalar) {
      q = cpu::RepackX8(*q, &DefaultThreadPool());
      if (!q.ok()) return q.status().WithContext(w.name);
    }
    return std::shared_ptr<const PackedMatrix>(std::make_shared<CpuQuantMatrix>(*q));
  }
  KILN_ASSIGN_OR_RETURN(cpu::PackedWeight p,
                        cpu::PackLinearWeight(w.dtype, w.data, w.shape[0], w.shape[1], &DefaultThreadPool()));
  return std::shared_ptr<const PackedMatrix>(std::make_shared<CpuPackedMatrix>(std::move(p)));
}

size_t CpuBackend::ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const {
  switch (node.op) {
    case OpKind::kGateUpSiluMul: {
      // gate and up side by side.
      int64_t cols = 2 * g.value(node.outputs[0]).cols;
      return static_cast<size_t>(capacity.Rows(g.value(node.inputs[0]).rows) * cols) * sizeof(float);
    }
    case OpKind::kMaskedSoftmax:
      // Valid column ranges of every softmax row: tokens x heads, twice.
      return static_cast<size_t>(2 * capacity.tokens * node.attrs.n_heads) * sizeof(int32_t);
    default: return 0;
  }
}

Expected<std::shared_ptr<const cpu::RopeTable>> CpuBackend::RopeTableFor(const ModelConfig& c,
                                                                        int64_t max_positions) {
  std::lock_guard<std::mutex> lock(rope_mu_);
  auto key = std::make_tuple(c.head_dim, c.rope_theta, static_cast<int>(c.rope_scaling.type),
                             c.rope_scaling.factor, max_positions);
  auto it = rope_tables_.find(key);
  if (it != rope_tables_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(cpu::RopeTable t,
                        cpu::RopeTable::Build(c.head_dim, c.head_dim, c.rope_theta, c.rope_scaling, max_positions));
  auto shared = std::make_shared<const cpu::RopeTable>(std::move(t));
  rope_tables_.emplace(key, shared);
  return shared;
}

Expected<Step> CpuBackend::Bind(const BindContext& ctx) {
  const Node& n = *ctx.node;
  Step step;
  step.name = n.name;
  step.op = n.op;
  step.backend = name_;
  const std::vector<BoundValue>& in = ctx.inputs;
  const std::vector<BoundValue>& out = ctx.outputs;
  for (const BoundValue& v : in) {
    if (v.rows != RowSpace::kNone && v.dtype != DType::kF32 && n.op != OpKind::kLinear &&
        n.op != OpKind::kGateUpSiluMul && n.op != OpKind::kTransfer) {
      return Unsupported("{} takes f32 inputs, got {}", OpName(n.op), DTypeName(v.dtype));
    }
  }

  switch (n.op) {
    case OpKind::kEmbedding: {
      const Weight* table = n.weights[0];
      BoundValue o = out[0];
      if (IsQuantized(table->dtype)) {
        cpu::RowDequantizer decode = cpu::QuantRowDequantizer(table->dtype);
        const int64_t vocab = table->shape[0], dim = table->shape[1];
        auto row_bytes = DTypeBytes(table->dtype, static_cast<uint64_t>(dim));
        if (decode == nullptr || !row_bytes || *row_bytes * static_cast<uint64_t>(vocab) != table->nbytes) {
          return Unsupported("{}: embedding table {} of {} [{}, {}] cannot be read by rows", n.name, table->name,
                             DTypeName(table->dtype), vocab, dim);
        }
        const auto bytes_per_row = static_cast<int64_t>(*row_bytes);
        step.run = [=](const RunState& s) {
          // Ids were validated against the vocabulary by Forward.
          (void)cpu::EmbeddingWith(Kc(s), decode, table->data, bytes_per_row, vocab, dim, s.batch->token_ids,
                                   s.batch->num_tokens, F(o), o.row_stride);
        };
        return step;
      }
      step.run = [table, o](const RunState& s) {
        // Ids were validated against the vocabulary by Forward.
        (void)cpu::Embedding(Kc(s), table->dtype, table->data, table->shape[0], table->shape[1], s.batch->token_ids,
                             s.batch->num_tokens, F(o), o.row_stride);
      };
      return step;
    }
    case OpKind::kRmsNorm: {
      const float* w = VectorWeight(n.weights[0]);
      auto eps = static_cast<float>(n.attrs.eps);
      BoundValue x = in[0], o = out[0];
      int64_t group = n.attrs.group;
      KILN_RETURN_IF_ERROR(CheckVector(n.weights[0], group > 0 ? group : x.cols, n.name));
      if (group > 0) {
        step.run = [=](const RunState& s) {
          cpu::RmsNormHeads(Kc(s), RowsOf(x.rows, s), x.cols / group, group, F(x), x.row_stride, w, eps, F(o),
                            o.row_stride);
        };
      } else {
        step.run = [=](const RunState& s) {
          cpu::RmsNorm(Kc(s), RowsOf(x.rows, s), x.cols, F(x), x.row_stride, w, eps, F(o), o.row_stride);
        };
      }
      return step;
    }
    case OpKind::kAddRmsNorm: {
      const float* w = VectorWeight(n.weights[0]);
      auto eps = static_cast<float>(n.attrs.eps);
      BoundValue x = in[0], residual = in[1], y = out[0], sum = out[1];
      KILN_RETURN_IF_ERROR(CheckVector(n.weights[0], x.cols, n.name));
      step.run = [=](const RunState& s) {
        int64_t rows = RowsOf(x.rows, s);
        // The kernel adds into the residual in place: start from a copy.
        CopyRows(rows, static_cast<size_t>(x.cols) * 4, residual.data, static_cast<size_t>(residual.row_stride) * 4,
                 sum.data, static_cast<size_t>(sum.row_stride) * 4);
        cpu::AddRmsNorm(Kc(s), rows, x.cols, F(x), x.row_stride, F(sum), sum.row_stride, w, eps, F(y), y.row_stride);
      };
      return step;
    }
    case OpKind::kLinear:
    case OpKind::kGateUpSiluMul: {
      if (!ctx.packed.empty() && QuantPacked(ctx.packed[0]) != nullptr) return BindQuantLinear(ctx, std::move(step));
      if (cpu::IsW8A8Node(ctx)) return cpu::BindW8A8Linear(ctx, std::move(step));
      size_t mats = n.weights.size() / 2;
      std::vector<const cpu::PackedWeight*> ws;
      std::vector<const float*> biases;
      std::vector<int64_t> offsets;
      int64_t total = 0;
      for (size_t j = 0; j < mats; ++j) {
        if (ctx.packed[j] == nullptr) return Internal("{}: weight {} not packed", n.name, j);
        ws.push_back(&Packed(ctx.packed[j]));
        KILN_RETURN_IF_ERROR(CheckVector(n.weights[mats + j], ws.back()->rows(), n.name));
        biases.push_back(VectorWeight(n.weights[mats + j]));
        offsets.push_back(total);
        total += ws.back()->rows();
      }
      BoundValue x = in[0], o = out[0];
      if (ws[0]->cols() != x.cols) {
        return InvalidArgument("{}: weight has {} inputs, activation has {}", n.name, ws[0]->cols(), x.cols);
      }
      const bool bf16_in = x.dtype == DType::kBF16;
      auto linear = [bf16_in](const KernelContext& k, int64_t rows, const BoundValue& x, const cpu::PackedWeight& w,
                              const float* bias, float* y, int64_t ldy) {
        if (bf16_in) {
          cpu::LinearBf16Input(k, rows, reinterpret_cast<const uint16_t*>(x.data), x.row_stride, w, bias, y, ldy);
        } else {
          cpu::Linear(k, rows, F(x), x.row_stride, w, bias, y, ldy);
        }
      };
      if (n.op == OpKind::kLinear) {
        if (total != o.cols) return InvalidArgument("{}: weights give {} outputs, value has {}", n.name, total, o.cols);
        step.run = [=](const RunState& s) {
          int64_t rows = RowsOf(x.rows, s);
          float* y = OutPtr(o, s);
          int64_t ldy = OutStride(o, s);
          for (size_t j = 0; j < ws.size(); ++j) linear(Kc(s), rows, x, *ws[j], biases[j], y + offsets[j], ldy);
        };
      } else {
        if (mats != 2 || ws[0]->rows() != o.cols || ws[1]->rows() != o.cols) {
          return InvalidArgument("{}: gate/up weights do not match the output width {}", n.name, o.cols);
        }
        auto* scratch = reinterpret_cast<float*>(ctx.scratch);
        int64_t width = o.cols;
        step.run = [=](const RunState& s) {
          int64_t rows = RowsOf(x.rows, s);
          linear(Kc(s), rows, x, *ws[0], nullptr, scratch, 2 * width);
          linear(Kc(s), rows, x, *ws[1], nullptr, scratch + width, 2 * width);
          cpu::SiluMul(Kc(s), rows, width, scratch, 2 * width, scratch + width, 2 * width, F(o), o.row_stride);
        };
      }
      return step;
    }
    case OpKind::kRope: {
      const ModelConfig& c = *ctx.config;
      KILN_ASSIGN_OR_RETURN(auto table, RopeTableFor(c, ctx.max_positions));
      BoundValue x = in[0], o = out[0];
      int64_t heads = n.attrs.n_heads;
      RopeStyle style = n.attrs.rope_style;
      step.run = [=](const RunState& s) {
        int64_t rows = RowsOf(x.rows, s);
        CopyRows(rows, static_cast<size_t>(x.cols) * 4, x.data, static_cast<size_t>(x.row_stride) * 4, o.data,
                 static_cast<size_t>(o.row_stride) * 4);
        cpu::ApplyRope(Kc(s), *table, style, rows, s.batch->positions, heads, F(o), o.row_stride);
      };
      return step;
    }
    case OpKind::kKvWrite: {
      BoundValue k = in[0], v = in[1];
      int64_t layer = n.attrs.layer;
      step.run = [=](const RunState& s) {
        cpu::KvWrite(Kc(s), KvView(s, layer), s.batch->num_tokens, s.slots, F(k), k.row_stride, F(v), v.row_stride);
      };
      return step;
    }
    case OpKind::kAttention: {
      BoundValue q = in[0], o = out[0];
      int64_t layer = n.attrs.layer;
      cpu::AttentionParams params;
      params.num_heads = static_cast<int32_t>(n.attrs.n_heads);
      params.scale = static_cast<float>(n.attrs.scale);
      params.window = static_cast<int32_t>(n.attrs.sliding_window);
      step.run = [=](const RunState& s) {
        cpu::AttentionBatch b;
        b.num_tokens = s.batch->num_tokens;
        b.token_seq = s.batch->token_seq;
        b.token_pos = s.batch->positions;
        b.num_seqs = s.batch->num_seqs;
        b.block_tables = s.batch->block_tables;
        b.block_table_lens = s.block_table_lens;
        cpu::PagedAttention(Kc(s), b, KvView(s, layer), params, F(q), q.row_stride, F(o), o.row_stride);
      };
      return step;
    }
    case OpKind::kSilu: {
      BoundValue x = in[0], o = out[0];
      step.run = [=](const RunState& s) {
        int64_t rows = RowsOf(x.rows, s);
        for (int64_t r = 0; r < rows; ++r) {
          const float* xr = F(x) + r * x.row_stride;
          float* orow = F(o) + r * o.row_stride;
          for (int64_t i = 0; i < x.cols; ++i) orow[i] = xr[i] / (1.0f + std::exp(-xr[i]));
        }
      };
      return step;
    }
    case OpKind::kGelu: {
      BoundValue x = in[0], o = out[0];
      cpu::GeluForm form = n.attrs.gelu_tanh ? cpu::GeluForm::kTanh : cpu::GeluForm::kErf;
      step.run = [=](const RunState& s) {
        cpu::Gelu(Kc(s), form, RowsOf(x.rows, s), x.cols, F(x), x.row_stride, F(o), o.row_stride);
      };
      return step;
    }
    case OpKind::kSiluMul:
    case OpKind::kGeluMul:
    case OpKind::kAdd:
    case OpKind::kMul: {
      BoundValue a = in[0], b = in[1], o = out[0];
      OpKind op = n.op;
      cpu::GeluForm form = n.attrs.gelu_tanh ? cpu::GeluForm::kTanh : cpu::GeluForm::kErf;
      step.run = [=](const RunState& s) {
        int64_t rows = RowsOf(a.rows, s);
        KernelContext k = Kc(s);
        switch (op) {
          case OpKind::kSiluMul:
            cpu::SiluMul(k, rows, a.cols, F(a), a.row_stride, F(b), b.row_stride, F(o), o.row_stride);
            break;
          case OpKind::kGeluMul:
            cpu::GeluMul(k, form, rows, a.cols, F(a), a.row_stride, F(b), b.row_stride, F(o), o.row_stride);
            break;
          case OpKind::kAdd:
            cpu::Add(k, rows, a.cols, F(a), a.row_stride, F(b), b.row_stride, F(o), o.row_stride);
            break;
          default: cpu::Mul(k, rows, a.cols, F(a), a.row_stride, F(b), b.row_stride, F(o), o.row_stride);
        }
      };
      return step;
    }
    case OpKind::kSoftmax: {
      BoundValue x = in[0], o = out[0];
      step.run = [=](const RunState& s) {
        cpu::Softmax(Kc(s), RowsOf(x.rows, s), x.cols, F(x), x.row_stride, 1.0f, F(o), o.row_stride);
      };
      return step;
    }
    case OpKind::kSelectRows: {
      BoundValue x = in[0], o = out[0];
      step.run = [=](const RunState& s) {
        for (int32_t r = 0; r < s.batch->num_output_rows; ++r) {
          std::memcpy(F(o) + r * o.row_stride, F(x) + s.batch->output_rows[r] * x.row_stride,
                      static_cast<size_t>(x.cols) * sizeof(float));
        }
      };
      return step;
    }
    case OpKind::kCast: {
      BoundValue x = in[0], o = out[0];
      step.run = [=](const RunState& s) {
        (void)cpu::ConvertRows(Kc(s), RowsOf(x.rows, s), x.cols, x.dtype, x.data, x.row_stride, o.dtype, o.data,
                               o.row_stride);
      };
      return step;
    }
    case OpKind::kTransfer: {
      BoundValue x = in[0], o = out[0];
      size_t row_bytes = static_cast<size_t>(DTypeBytes(x.dtype, static_cast<uint64_t>(x.cols)).value_or(0));
      step.run = [=](const RunState& s) {
        size_t elem = row_bytes / static_cast<size_t>(x.cols);
        CopyRows(RowsOf(x.rows, s), row_bytes, x.data, static_cast<size_t>(x.row_stride) * elem,
                 o.is_output ? reinterpret_cast<uint8_t*>(s.logits) : o.data,
                 static_cast<size_t>(OutStride(o, s)) * elem);
      };
      return step;
    }
    case OpKind::kGatherKv: {
      BoundValue k = out[0], v = out[1];
      int64_t layer = n.attrs.layer;
      step.run = [=](const RunState& s) {
        for (int32_t q = 0; q < s.batch->num_seqs; ++q) {
          int64_t off = s.context_offsets[q];
          cpu::GatherKv(Kc(s), KvView(s, layer), s.batch->block_tables[q], s.batch->seq_lens[q],
                        F(k) + off * k.row_stride, k.row_stride, F(v) + off * v.row_stride, v.row_stride);
        }
      };
      return step;
    }
    case OpKind::kAttnScores: {
      // Scores of sequence s, head h: [t_s x c_s] at (score_offsets[s] *
      // heads + h * t_s * c_s); S = Q K^T per head, K shared by the group.
      BoundValue q = in[0], k = in[1], sc = out[0];
      int64_t heads = n.attrs.n_heads, group = n.attrs.n_heads / n.attrs.n_kv_heads, d = n.attrs.head_dim;
      step.run = [=](const RunState& s) {
        for (int32_t i = 0; i < s.batch->num_seqs; ++i) {
          int64_t t0 = s.batch->query_start[i], ts = s.batch->query_start[i + 1] - t0, cs = s.batch->seq_lens[i];
          cpu::ConstMatrixBatch a{F(q) + t0 * q.row_stride, q.row_stride, d};
          cpu::ConstMatrixBatch b{F(k) + s.context_offsets[i] * k.row_stride, k.row_stride, d};
          cpu::MatrixBatch c{F(sc) + s.score_offsets[i] * heads, cs, ts * cs};
          cpu::MatMul(Kc(s), heads, ts, cs, d, a, b, /*transpose_b=*/true, c, group);
        }
      };
      return step;
    }
    case OpKind::kMaskedSoftmax: {
      BoundValue x = in[0], o = out[0];
      int64_t heads = n.attrs.n_heads, window = n.attrs.sliding_window;
      auto scale = static_cast<float>(n.attrs.scale);
      auto* ranges = reinterpret_cast<int32_t*>(ctx.scratch);
      int64_t cap = ctx.capacity.tokens * heads;
      step.run = [=](const RunState& s) {
        int32_t* begin = ranges;
        int32_t* end = ranges + cap;
        for (int32_t i = 0; i < s.batch->num_seqs; ++i) {
          int64_t t0 = s.batch->query_start[i], ts = s.batch->query_start[i + 1] - t0, cs = s.batch->seq_lens[i];
          for (int64_t h = 0; h < heads; ++h) {
            for (int64_t m = 0; m < ts; ++m) {
              int32_t p = s.batch->positions[t0 + m];
              begin[h * ts + m] = window > 0 ? std::max<int32_t>(0, p - static_cast<int32_t>(window) + 1) : 0;
              end[h * ts + m] = p + 1;
            }
          }
          float* base_in = F(x) + s.score_offsets[i] * heads;
          float* base_out = F(o) + s.score_offsets[i] * heads;
          cpu::MaskedSoftmax(Kc(s), heads * ts, cs, base_in, cs, scale, begin, end, base_out, cs);
        }
      };
      return step;
    }
    case OpKind::kAttnValues: {
      BoundValue p = in[0], v = in[1], o = out[0];
      int64_t heads = n.attrs.n_heads, group = n.attrs.n_heads / n.attrs.n_kv_heads, d = n.attrs.head_dim;
      step.run = [=](const RunState& s) {
        for (int32_t i = 0; i < s.batch->num_seqs; ++i) {
          int64_t t0 = s.batch->query_start[i], ts = s.batch->query_start[i + 1] - t0, cs = s.batch->seq_lens[i];
          cpu::ConstMatrixBatch a{F(p) + s.score_offsets[i] * heads, cs, ts * cs};
          cpu::ConstMatrixBatch b{F(v) + s.context_offsets[i] * v.row_stride, v.row_stride, d};
          cpu::MatrixBatch c{F(o) + t0 * o.row_stride, o.row_stride, d};
          cpu::MatMul(Kc(s), heads, ts, d, cs, a, b, /*transpose_b=*/false, c, group);
        }
      };
      return step;
    }
  }
  return Unsupported("cpu backend: no kernel for op {}", OpName(n.op));
}

}  // namespace kiln
