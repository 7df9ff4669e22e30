// Einsum as batched matmuls, and the plain loop over all labels.
#include "backend/cpu/tensor_kernels/einsum_kernel.h"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/cpu/tensor_kernels/packed_gemm.h"
#include "backend/cpu/tensor_kernels/scratch_alignment.h"
#include "graph/tensor_ops/einsum_equation.h"

namespace kiln::cpu {
namespace {

Expected<EinsumEquation> EquationOf(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(std::string equation, args.a().String("equation"));
  std::vector<std::vector<int64_t>> dims;
  for (const TensorType& t : args.inputs) dims.push_back(t.dims);
  return ParseEinsum(args.node, equation, dims);
}

// The plain loop: the output's labels outside, the summed labels inside;
// each operand's stride per label (summed for a repeated label: a diagonal;
// zero for a broadcast axis of size 1).
struct LoopPlan {
  std::vector<int64_t> out_sizes, sum_sizes;
  // [operand][label position]: strides over the output labels, then the summed ones.
  std::vector<std::vector<int64_t>> strides;
};

LoopPlan MakeLoopPlan(const EinsumEquation& eq, const std::vector<TensorType>& inputs) {
  LoopPlan p;
  std::vector<int> order = eq.output;
  std::vector<bool> used(static_cast<size_t>(eq.num_labels), false);
  for (const auto& labels : eq.inputs) {
    for (int l : labels) used[static_cast<size_t>(l)] = true;
  }
  for (int l : eq.output) p.out_sizes.push_back(eq.size[static_cast<size_t>(l)]);
  for (int l = 0; l < eq.num_labels; ++l) {
    if (used[static_cast<size_t>(l)] && !eq.InOutput(l)) {
      order.push_back(l);
      p.sum_sizes.push_back(eq.size[static_cast<size_t>(l)]);
    }
  }
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    const auto& dims = inputs[i].dims;
    std::vector<int64_t> axis_stride(dims.size(), 1);
    for (size_t d = dims.size(); d-- > 1;) axis_stride[d - 1] = axis_stride[d] * dims[d];
    std::vector<int64_t> s(order.size(), 0);
    for (size_t axis = 0; axis < dims.size(); ++axis) {
      if (dims[axis] == 1) continue;
      const size_t pos =
          static_cast<size_t>(std::find(order.begin(), order.end(), eq.inputs[i][axis]) - order.begin());
      s[pos] += axis_stride[axis];
    }
    p.strides.push_back(std::move(s));
  }
  return p;
}

template <typename T>
void RunLoop(const LoopPlan& p, const void* const* inputs, T* out) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  const size_t n_ops = p.strides.size(), n_out = p.out_sizes.size(), n_sum = p.sum_sizes.size();
  int64_t out_total = 1, sum_total = 1;
  for (int64_t s : p.out_sizes) out_total *= s;
  for (int64_t s : p.sum_sizes) sum_total *= s;
  std::vector<int64_t> out_idx(n_out, 0), sum_idx(n_sum, 0), base(n_ops, 0), off(n_ops, 0);
  for (int64_t o = 0; o < out_total; ++o) {
    Acc sum = 0;
    off = base;
    std::fill(sum_idx.begin(), sum_idx.end(), 0);
    for (int64_t s = 0; s < sum_total; ++s) {
      Acc prod = 1;
      for (size_t i = 0; i < n_ops; ++i) prod *= static_cast<Acc>(static_cast<const T*>(inputs[i])[off[i]]);
      sum += prod;
      for (size_t d = n_sum; d-- > 0;) {
        for (size_t i = 0; i < n_ops; ++i) off[i] += p.strides[i][n_out + d];
        if (++sum_idx[d] < p.sum_sizes[d]) break;
        for (size_t i = 0; i < n_ops; ++i) off[i] -= p.strides[i][n_out + d] * p.sum_sizes[d];
        sum_idx[d] = 0;
      }
    }
    out[o] = static_cast<T>(sum);
    for (size_t d = n_out; d-- > 0;) {
      for (size_t i = 0; i < n_ops; ++i) base[i] += p.strides[i][d];
      if (++out_idx[d] < p.out_sizes[d]) break;
      for (size_t i = 0; i < n_ops; ++i) base[i] -= p.strides[i][d] * p.out_sizes[d];
      out_idx[d] = 0;
    }
  }
}

template <typename T>
TensorKernel LoopKernel(LoopPlan plan) {
  auto p = std::make_shared<LoopPlan>(std::move(plan));
  TensorKernel k;
  k.impl = "reference";
  k.run = [p](const TensorCall& call) {
    RunLoop<T>(*p, call.inputs, static_cast<T*>(call.outputs[0]));
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> LoopKernelFor(const EinsumEquation& eq, const TensorKernelArgs& args) {
  LoopPlan plan = MakeLoopPlan(eq, args.inputs);
  switch (args.inputs[0].dtype) {
    case DType::kF32: return LoopKernel<float>(std::move(plan));
    case DType::kF64: return LoopKernel<double>(std::move(plan));
    case DType::kI32: return LoopKernel<int32_t>(std::move(plan));
    case DType::kI64: return LoopKernel<int64_t>(std::move(plan));
    default:
      return Unsupported("dtype {} not supported (f32, f64, i32, i64)", DTypeName(args.inputs[0].dtype));
  }
}

// A two-operand product as C[batch, M, N] = A[batch, M, K] B[batch, K, N]
// where each of batch, M, N, K is a group of labels.
struct MatMulPlan {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  std::vector<int64_t> a_dims, b_dims;
  std::vector<int> a_perm, b_perm;  // empty: already in order
  bool b_transposed = false;        // B is [batch, N, K] as given
  std::vector<int64_t> c_dims;      // [batch..., M..., N...] label sizes
  std::vector<int> c_perm;          // output axis i = c axis c_perm[i]; empty: in order
  std::vector<int64_t> a_offset, b_offset, b_index;
  int a_input = 0, b_input = 1;           // which operand plays A and which B
  std::shared_ptr<PackedWeightPanels> packed;  // B packed at bind time when it is a constant
  size_t a_bytes = 0, b_bytes = 0, packed_bytes = 0, c_bytes = 0;
};

bool IsIdentity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int>(i)) return false;
  }
  return true;
}

// The axes of `labels` in the order of `want` (every label of want is in labels).
std::vector<int> PermFor(const std::vector<int>& labels, const std::vector<int>& want) {
  std::vector<int> perm;
  for (int l : want)
    perm.push_back(static_cast<int>(std::find(labels.begin(), labels.end(), l) - labels.begin()));
  return perm;
}

// Whether eq is such a product; fills the plan.
// With `swap`, operand 1 plays A and operand 0 B (so that a constant
// operand 0 is the one packed at bind time).
bool PlanMatMul(const EinsumEquation& eq, const TensorKernelArgs& args, bool swap, MatMulPlan* p) {
  if (eq.inputs.size() != 2) return false;
  p->a_input = swap ? 1 : 0;
  p->b_input = swap ? 0 : 1;
  const auto& al = eq.inputs[static_cast<size_t>(p->a_input)];
  const auto& bl = eq.inputs[static_cast<size_t>(p->b_input)];
  const TensorType& at = args.inputs[static_cast<size_t>(p->a_input)];
  const TensorType& bt = args.inputs[static_cast<size_t>(p->b_input)];
  auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  for (const auto* labels : {&al, &bl}) {
    std::vector<int> sorted = *labels;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;  // a diagonal
  }
  std::vector<int> batch, ms, ns, ks;
  for (int l : eq.output) {
    if (has(al, l) && has(bl, l)) batch.push_back(l);
  }
  for (int l : al) {
    if (has(bl, l) && !eq.InOutput(l)) ks.push_back(l);
    if (!has(bl, l)) {
      if (!eq.InOutput(l)) return false;  // summed over A alone
      ms.push_back(l);
    }
  }
  for (int l : bl) {
    if (!has(al, l)) {
      if (!eq.InOutput(l)) return false;
      ns.push_back(l);
    }
  }
  // Shared labels must have the same size in both (no broadcasting).
  for (size_t axis = 0; axis < al.size(); ++axis) {
    if (at.dims[axis] != eq.size[static_cast<size_t>(al[axis])]) return false;
  }
  for (size_t axis = 0; axis < bl.size(); ++axis) {
    if (bt.dims[axis] != eq.size[static_cast<size_t>(bl[axis])]) return false;
  }
  auto product = [&](const std::vector<int>& labels) {
    int64_t n = 1;
    for (int l : labels) n *= eq.size[static_cast<size_t>(l)];
    return n;
  };
  p->batch = product(batch);
  p->m = product(ms);
  p->n = product(ns);
  p->k = product(ks);
  p->a_dims = at.dims;
  p->b_dims = bt.dims;
  std::vector<int> a_want = batch;
  a_want.insert(a_want.end(), ms.begin(), ms.end());
  a_want.insert(a_want.end(), ks.begin(), ks.end());
  p->a_perm = PermFor(al, a_want);
  if (IsIdentity(p->a_perm)) p->a_perm.clear();
  std::vector<int> b_want = batch;
  b_want.insert(b_want.end(), ks.begin(), ks.end());
  b_want.insert(b_want.end(), ns.begin(), ns.end());
  std::vector<int> b_want_t = batch;
  b_want_t.insert(b_want_t.end(), ns.begin(), ns.end());
  b_want_t.insert(b_want_t.end(), ks.begin(), ks.end());
  p->b_perm = PermFor(bl, b_want);
  if (IsIdentity(p->b_perm)) {
    p->b_perm.clear();
  } else if (IsIdentity(PermFor(bl, b_want_t))) {
    p->b_perm.clear();
    p->b_transposed = true;
  }
  std::vector<int> c_labels = batch;
  c_labels.insert(c_labels.end(), ms.begin(), ms.end());
  c_labels.insert(c_labels.end(), ns.begin(), ns.end());
  for (int l : c_labels) p->c_dims.push_back(eq.size[static_cast<size_t>(l)]);
  p->c_perm = PermFor(c_labels, eq.output);
  if (IsIdentity(p->c_perm)) p->c_perm.clear();
  for (int64_t i = 0; i < p->batch; ++i) {
    p->a_offset.push_back(i * p->m * p->k);
    p->b_offset.push_back(i * p->k * p->n);
    p->b_index.push_back(i);
  }
  const size_t f = sizeof(float);
  if (!p->a_perm.empty()) p->a_bytes = AlignUp(static_cast<size_t>(p->batch * p->m * p->k) * f);
  if (!p->b_perm.empty()) p->b_bytes = AlignUp(static_cast<size_t>(p->batch * p->k * p->n) * f);
  p->packed_bytes = AlignUp(static_cast<size_t>(p->batch * PackedBFloats(p->k, p->n)) * f);
  if (!p->c_perm.empty()) p->c_bytes = AlignUp(static_cast<size_t>(p->batch * p->m * p->n) * f);
  return true;
}

}  // namespace

Expected<TensorKernel> MakeEinsumReference(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(EinsumEquation eq, EquationOf(args));
  return LoopKernelFor(eq, args);
}

// B as panels: permuted into [batch, K, N] where needed (through `scratch`,
// p.b_bytes), then packed into `packed`.
void PackEinsumB(const KernelContext& ctx, const MatMulPlan& p, const float* b, float* scratch,
                 float* packed) {
  if (!p.b_perm.empty()) {
    PermuteCopy(b, p.b_dims, p.b_perm, scratch);
    b = scratch;
  }
  PackBMatrices(ctx, b, p.b_offset.data(), p.batch, p.k, p.n, p.b_transposed ? 1 : p.n,
                p.b_transposed ? p.k : 1, 1.0f, packed);
}

Expected<TensorKernel> MakeEinsum(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(EinsumEquation eq, EquationOf(args));
  auto plan = std::make_shared<MatMulPlan>();
  auto constant = [&](size_t i) { return i < args.constants.size() ? args.constants[i] : nullptr; };
  const bool swap = constant(0) != nullptr && constant(1) == nullptr;
  if (args.inputs[0].dtype != DType::kF32 || !PlanMatMul(eq, args, swap, plan.get()))
    return LoopKernelFor(eq, args);
  TensorKernel k;
  k.impl = std::string(PackedGemmImpl()) + " batched-matmul";
  if (const TensorData* b = constant(static_cast<size_t>(plan->b_input))) {
    // A constant operand: permuted and packed once, here.
    plan->packed = std::make_shared<PackedWeightPanels>(
        args.laid_out, args.node, "kiln-einsum-panels", static_cast<int64_t>(plan->packed_bytes / sizeof(float)),
        [&](float* dst) {
          std::vector<float> permuted(plan->b_bytes / sizeof(float));
          PackEinsumB(KernelContext{}, *plan, b->As<float>(), permuted.data(), dst);
        });
    plan->b_bytes = 0;
    plan->packed_bytes = 0;
    k.impl += " packed-weights";
  }
  k.scratch_bytes = plan->a_bytes + plan->b_bytes + plan->packed_bytes + plan->c_bytes;
  k.run = [plan](const TensorCall& call) {
    const MatMulPlan& p = *plan;
    KernelContext ctx{call.pool, BestIsa()};
    uint8_t* scratch = call.scratch;
    const float* a = static_cast<const float*>(call.inputs[p.a_input]);
    if (!p.a_perm.empty()) {
      float* dst = reinterpret_cast<float*>(scratch);
      PermuteCopy(a, p.a_dims, p.a_perm, dst);
      a = dst;
      scratch += p.a_bytes;
    }
    const float* packed = p.packed ? p.packed->data() : nullptr;
    if (packed == nullptr) {
      float* b_scratch = reinterpret_cast<float*>(scratch);
      float* dst = reinterpret_cast<float*>(scratch + p.b_bytes);
      PackEinsumB(ctx, p, static_cast<const float*>(call.inputs[p.b_input]), b_scratch, dst);
      packed = dst;
      scratch += p.b_bytes + p.packed_bytes;
    }
    float* c = p.c_perm.empty() ? static_cast<float*>(call.outputs[0]) : reinterpret_cast<float*>(scratch);
    PackedGemm g;
    g.batch = p.batch;
    g.m = p.m;
    g.n = p.n;
    g.k = p.k;
    g.a = a;
    g.lda = p.k;
    g.a_offset = p.a_offset.data();
    g.packed = packed;
    g.b_index = p.b_index.data();
    g.c = c;
    g.ldc = p.n;
    g.c_stride = p.m * p.n;
    RunPackedGemm(ctx, g);
    if (!p.c_perm.empty()) PermuteCopy(c, p.c_dims, p.c_perm, static_cast<float*>(call.outputs[0]));
    return Status::Ok();
  };
  return k;
}

}  // namespace kiln::cpu
