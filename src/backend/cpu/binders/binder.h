// The CPU backend's binders: one function per op (or family of ops) that
// checks a placed node's buffers and weights and returns its kernel call,
// a closure over them. CpuBackend::Bind looks the op's binder up here.
#pragma once

#include <map>
#include <mutex>

#include "backend/backend.h"
#include "backend/cpu/binders/rope_table_cache.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/status.h"

namespace kiln::cpu {

// Tensor kernels made when the compiler asks a node's scratch size, kept
// until the node is bound (so weights are packed once).
class TensorKernelCache {
 public:
  Expected<const TensorKernel*> Get(const Graph& g, const Node& n, int num_threads);
  void Forget(const Node& n);

 private:
  struct Entry {
    std::string op_type, name;
    AttributeMap attrs;
    std::vector<TensorType> inputs, outputs;
    std::vector<const TensorData*> constants;
    // Keeps the constants alive while the entry is, so that no other
    // constant can take one's address.
    std::vector<std::shared_ptr<const TensorData>> keep;
    TensorKernel kernel;
  };
  std::mutex mu_;
  std::map<const Node*, Entry> kernels_;
};

// What binders keep across nodes and models.
struct BindCaches {
  RopeTableCache rope_tables;
  TensorKernelCache tensor_kernels;
};

// The threads tensor kernels size their per-thread scratch for (the
// machine's); a kernel run on a larger pool uses at most this many.
int TensorKernelThreads();

// A tensor op node's kernel arguments, from its values in g.
Expected<TensorKernelArgs> TensorKernelArgsOf(const Graph& g, const Node& n, int num_threads);

// Binds ctx.node; `step` comes with its name, op and backend filled in.
using Binder = Expected<Step> (*)(const BindContext& ctx, BindCaches& caches, Step step);

// The binder of `op`, or null when the CPU backend has none.
Binder BinderFor(OpKind op);

// The binders, each in a file of its own (<family>_binder.cc).
Expected<Step> BindEmbedding(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindRmsNorm(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindAddRmsNorm(const BindContext& ctx, BindCaches& caches, Step step);
// linear and gate_up_silu_mul, on float, block-quantized or W8A8 weights.
Expected<Step> BindLinear(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindQuantLinear(const BindContext& ctx, Step step);
Expected<Step> BindRope(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindKvWrite(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindAttention(const BindContext& ctx, BindCaches& caches, Step step);
// Attention decomposed into gather, matmul, masked softmax and matmul.
Expected<Step> BindGatherKv(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindAttnScores(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindMaskedSoftmax(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindAttnValues(const BindContext& ctx, BindCaches& caches, Step step);
// silu, gelu and softmax (one input); silu_mul, gelu_mul, add and mul (two).
Expected<Step> BindUnary(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindBinary(const BindContext& ctx, BindCaches& caches, Step step);
// select_rows, cast and transfer: rows moved or converted.
Expected<Step> BindSelectRows(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindCast(const BindContext& ctx, BindCaches& caches, Step step);
Expected<Step> BindTransfer(const BindContext& ctx, BindCaches& caches, Step step);
// A mixture of experts, and the scratch it needs for `rows` rows.
Expected<Step> BindMoe(const BindContext& ctx, BindCaches& caches, Step step);
size_t MoeScratchBytes(const Graph& g, const Node& n, int64_t rows);
// Tensor parallelism's sum over the ranks (backend/collective.h).
Expected<Step> BindAllReduceSum(const BindContext& ctx, BindCaches& caches, Step step);
// Every N-dimensional tensor op (tensor_kernels/).
Expected<Step> BindTensorOp(const BindContext& ctx, BindCaches& caches, Step step);

}  // namespace kiln::cpu
