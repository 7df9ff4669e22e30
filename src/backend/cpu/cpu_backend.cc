// The CPU backend's support list, weight packing, scratch needs, and the
// dispatch of each node to its op's binder.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/binders/binder.h"
#include "backend/cpu/tensor_kernels/bf16_compute.h"
#include "backend/cpu/cpu_packed_matrix.h"
#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "backend/cpu/kernels/weight_memory.h"
#include "backend/cpu/tensor_kernels/conv_layout_preference.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "backend/cpu/w8a8/w8a8_bind.h"
#include "core/cpu_info.h"
#include "core/mapped_file.h"
#include "core/system_memory.h"
#include "core/thread_pool.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

// False where KILN_X8=0 asks for the GGUF rows alone. Read at each pack
// (a load's cost is the copy), so that one process can compile a model
// both ways and compare them.
bool X8RepackAllowed() {
  const char* env = std::getenv("KILN_X8");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

// Whether a copy of `bytes` that sits beside rows it cannot release (a
// generated mixture's experts held in memory, not in a scratch file: the
// rows are their only copy) still fits:
// such copies are made while the machine keeps a quarter of its memory, and
// at least 4 GiB, available; past that the experts stay on their rows, so
// that a mixture that fits once is not pushed out of memory by its copy.
bool ReserveUnreleasedCopy(uint64_t bytes) {
  static std::atomic<int64_t> budget = [] {
    const int64_t keep = std::max<int64_t>(TotalMemoryBytes() / 4, int64_t{4} << 30);
    return AvailableMemoryBytes() - keep;
  }();
  const auto b = static_cast<int64_t>(bytes);
  if (budget.fetch_sub(b) >= b) return true;
  budget.fetch_add(b);
  return false;
}

SupportEntry Everything(OpKind op) {
  SupportEntry e;
  e.op = op;
  e.activation_dtypes = {DType::kF32, DType::kBF16};
  return e;
}

bool IsMatmul(const Node* n) {
  return n != nullptr && (n->op == OpKind::kLinear || n->op == OpKind::kGateUpSiluMul);
}

}  // namespace

CpuBackend::CpuBackend() : caches_(std::make_unique<cpu::BindCaches>()) {
  const std::vector<DType>& quantized = cpu::QuantKernelTypes();
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto op = static_cast<OpKind>(i);
    if (op == OpKind::kTensorOp) {
      // The tensor ops listed one by one, with their kernels' limits.
      for (const cpu::TensorKernelEntry& k : cpu::AllTensorKernels()) {
        SupportEntry t;
        t.op = op;
        t.op_type = k.op_type;
        t.activation_dtypes = k.dtypes;
        t.note = k.limits;
        support_.Add(std::move(t));
      }
      continue;
    }
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
    if (op == OpKind::kMoe) {
      // Each matrix on the kernels of its own dtype.
      e.activation_dtypes = {DType::kF32};
      e.weight_dtypes = {DType::kF32, DType::kF16, DType::kBF16};
      e.weight_dtypes.insert(e.weight_dtypes.end(), quantized.begin(), quantized.end());
      e.weight_layout = "panel16 / gguf-rows";
    }
    support_.Add(std::move(e));
  }
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::description() const {
  return fmt::format("host CPU ({}), {} kernels", GetCpuInfo().Summary(), GetCpuInfo().BestIsa());
}

bool CpuBackend::has_native_bf16_dot() const { return GetCpuInfo().avx512_bf16; }

bool CpuBackend::has_bf16_tensor_products() const { return cpu::CpuMultipliesBf16(); }

TensorLayout CpuBackend::WantedLayout(const Graph& g, const Node& node) const {
  if (node.op != OpKind::kTensorOp) return TensorLayout::kRowMajor;
  auto args = cpu::TensorKernelArgsOf(g, node, cpu::TensorKernelThreads());
  if (!args.ok() || !cpu::ConvPrefersBlockedActivations(*args)) return TensorLayout::kRowMajor;
  return TakesLayout(g, node, TensorLayout::kNCHW16c) ? TensorLayout::kNCHW16c : TensorLayout::kRowMajor;
}

bool CpuBackend::TakesLayout(const Graph& g, const Node& node, TensorLayout layout) const {
  if (layout == TensorLayout::kRowMajor) return true;
  if (node.op != OpKind::kTensorOp) return false;
  const cpu::TensorKernelEntry* entry = cpu::FindTensorKernel(node.op_type);
  if (entry == nullptr || entry->takes_layout == nullptr) return false;
  auto args = cpu::TensorKernelArgsOf(g, node, cpu::TensorKernelThreads());
  return args.ok() && entry->takes_layout(layout, *args);
}

bool CpuBackend::ReadsRowMajorInput(const Graph& g, const Node& node, TensorLayout layout) const {
  if (layout != TensorLayout::kNCHW16c || node.op != OpKind::kTensorOp) return false;
  auto args = cpu::TensorKernelArgsOf(g, node, cpu::TensorKernelThreads());
  return args.ok() && cpu::ConvReadsRowMajorInput(*args);
}

Expected<std::shared_ptr<const PackedMatrix>> CpuBackend::PackWeight(const PackRequest& request) {
  if (request.weight == nullptr) return InvalidArgument("cpu backend: a pack request without a weight");
  const Weight& w = *request.weight;
  if (w.shape.size() != 2) return InvalidArgument("{}: not a matrix", w.name);
  if (request.int8 && IsMatmul(request.node) && cpu::W8A8Applies(w)) {
    return cpu::PackW8A8Matrix(w, request.activation_clip);
  }
  if (IsQuantized(w.dtype)) {
    auto q = cpu::MakeQuantMatrix(w.dtype, w.data, w.nbytes, w.shape[0], w.shape[1]);
    if (!q.ok()) return q.status().WithContext(w.name);
    // Where the vector kernels run, they read a repacked copy: one stream
    // per row group, in huge pages (see bench/RESULTS.md for the gain).
    // Where the copy serves any number of rows (X8ServesEveryRowCount) it
    // replaces the rows: pages of a mapped file are dropped after the copy
    // (a later read, such as a tied embedding's lookups, brings back what
    // it touches). A mixture's matrices (its experts are most of a large
    // model's bytes) get a copy only there, so that they are not held
    // twice; generated weights held in memory keep their rows, their only
    // copy, so a mixture's copies are made only while they fit
    // (ReserveUnreleasedCopy). KILN_X8=0 keeps the GGUF rows alone, to
    // compare with the row kernels.
    const bool mixture = request.node != nullptr && request.node->op == OpKind::kMoe;
    const bool replaces_rows = cpu::X8ServesEveryRowCount(w.dtype);
    const bool wanted = cpu::BestIsa() != cpu::Isa::kScalar && cpu::HasX8Layout(w.dtype) &&
                        (!mixture || replaces_rows) && X8RepackAllowed();
    if (wanted && (!mixture || w.file_mapped || ReserveUnreleasedCopy(w.nbytes))) {
      q = cpu::RepackX8(*q, &DefaultThreadPool());
      if (!q.ok()) return q.status().WithContext(w.name);
      if (w.file_mapped && replaces_rows && q->x8() != nullptr) DropMappedPages(w.data, w.nbytes);
    }
    return std::shared_ptr<const PackedMatrix>(std::make_shared<cpu::BlockQuantMatrix>(*q));
  }
  KILN_ASSIGN_OR_RETURN(cpu::PackedWeight p,
                        cpu::PackLinearWeight(w.dtype, w.data, w.shape[0], w.shape[1], &DefaultThreadPool()));
  return std::shared_ptr<const PackedMatrix>(std::make_shared<cpu::PanelMatrix>(std::move(p)));
}

Expected<std::shared_ptr<const PackedMatrix>> CpuBackend::AdoptPacked(const PackRequest& request,
                                                                       const StoredPackedMatrix& stored) {
  if (request.weight == nullptr) return InvalidArgument("cpu backend: an adopt request without a weight");
  const Weight& w = *request.weight;
  if (w.shape.size() != 2) return InvalidArgument("{}: not a matrix", w.name);
  auto part = [&](const char* name) -> Expected<std::span<const uint8_t>> {
    auto it = stored.parts.find(name);
    if (it == stored.parts.end()) return Corrupt("{}: packed layout {} without its '{}' part", w.name, stored.layout, name);
    return it->second;
  };
  if (request.int8 && IsMatmul(request.node) && cpu::W8A8Applies(w)) {
    return Unsupported("{}: W8A8 weights are not stored in artifacts", w.name);
  }
  std::shared_ptr<const PackedMatrix> adopted;
  if (IsQuantized(w.dtype)) {
    auto q = cpu::MakeQuantMatrix(w.dtype, w.data, w.nbytes, w.shape[0], w.shape[1]);
    if (!q.ok()) return q.status().WithContext(w.name);
    // The stored form says whether the kernels read an x8 copy (PackWeight
    // may have kept the rows alone: a mixture's experts, KILN_X8=0).
    if (stored.parts.count("x8") > 0) {
      if (cpu::BestIsa() == cpu::Isa::kScalar || !cpu::HasX8Layout(w.dtype)) {
        return Unsupported("{}: stored in layout {}, which this CPU's kernels do not read", w.name, stored.layout);
      }
      KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> x8, part("x8"));
      KILN_ASSIGN_OR_RETURN(DomainBuffer memory, cpu::AdoptWeightMemory(x8));
      q = cpu::AdoptX8(*q, std::move(memory));
      if (!q.ok()) return q.status().WithContext(w.name);
    }
    adopted = std::make_shared<cpu::BlockQuantMatrix>(*q);
  } else {
    KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> panels, part("panels"));
    KILN_ASSIGN_OR_RETURN(DomainBuffer memory, cpu::AdoptWeightMemory(panels));
    auto p = cpu::AdoptPackedLinearWeight(w.dtype, w.shape[0], w.shape[1], std::move(memory));
    if (!p.ok()) return p.status().WithContext(w.name);
    adopted = std::make_shared<cpu::PanelMatrix>(std::move(*p));
  }
  if (adopted->layout() != stored.layout) {
    return Unsupported("{}: stored in layout {}, which this CPU's kernels do not read (they take {})", w.name,
                       stored.layout, adopted->layout());
  }
  return adopted;
}

size_t CpuBackend::ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const {
  switch (node.op) {
    case OpKind::kGateUpSiluMul: {
      // gate and up side by side.
      int64_t cols = 2 * g.value(node.outputs[0]).cols;
      return static_cast<size_t>(capacity.Rows(g.value(node.inputs[0]).rows) * cols) * sizeof(float);
    }
    case OpKind::kTensorOp: {
      auto kernel = caches_->tensor_kernels.Get(g, node, cpu::TensorKernelThreads());
      // An error surfaces when the node is bound.
      return kernel.ok() ? (*kernel)->scratch_bytes : 0;
    }
    case OpKind::kMoe: return cpu::MoeScratchBytes(g, node, capacity.Rows(g.value(node.inputs[0]).rows));
    case OpKind::kMaskedSoftmax:
      // Valid column ranges of every softmax row: tokens x heads, twice.
      return static_cast<size_t>(2 * capacity.tokens * node.attrs.n_heads) * sizeof(int32_t);
    default: return 0;
  }
}

void CpuBackend::ForgetTensorKernel(const Node& node) { caches_->tensor_kernels.Forget(node); }

Expected<Step> CpuBackend::Bind(const BindContext& ctx) {
  const Node& n = *ctx.node;
  for (const BoundValue& v : ctx.inputs) {
    if (n.op == OpKind::kTensorOp) break;  // tensor kernels check their own dtypes
    if (v.rows != RowSpace::kNone && v.dtype != DType::kF32 && n.op != OpKind::kLinear &&
        n.op != OpKind::kGateUpSiluMul && n.op != OpKind::kTransfer) {
      return Unsupported("{} takes f32 inputs, got {}", OpName(n.op), DTypeName(v.dtype));
    }
  }
  cpu::Binder bind = cpu::BinderFor(n.op);
  if (bind == nullptr) return Unsupported("cpu backend: no kernel for op {}", OpName(n.op));
  Step step;
  step.name = n.name;
  step.op = n.op;
  step.backend = name_;
  return bind(ctx, *caches_, std::move(step));
}

}  // namespace kiln
