// The binder of every tensor op: the node's kernel from the tensor kernel
// table (made once per node, when the compiler first asks for its scratch
// size), called on the node's buffers as the run resolves them.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "backend/cpu/binders/binder.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

int TensorKernelThreads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

Expected<TensorKernelArgs> TensorKernelArgsOf(const Graph& g, const Node& n, int num_threads) {
  if (n.op != OpKind::kTensorOp) return Internal("{} is not a tensor op", n.name);
  TensorKernelArgs args;
  args.op_type = n.op_type;
  args.node = n.name;
  args.attrs = &n.named_attrs;
  args.num_threads = num_threads;
  args.laid_out = g.laid_out.get();
  if (n.opset > 0) args.opset = n.opset;
  for (ValueId in : n.inputs) {
    if (in == kNoValue) {
      args.inputs.emplace_back();
      args.present.push_back(false);
      args.constants.push_back(nullptr);
      continue;
    }
    const Value& v = g.value(in);
    if (!v.is_tensor()) return Unsupported("{}: input {} is not an N-d tensor", n.name, v.name);
    args.inputs.push_back(v.tensor_type());
    args.present.push_back(true);
    args.constants.push_back(v.constant.get());
  }
  for (ValueId out : n.outputs) args.outputs.push_back(g.value(out).tensor_type());
  return args;
}

Expected<const TensorKernel*> TensorKernelCache::Get(const Graph& g, const Node& n, int num_threads) {
  KILN_ASSIGN_OR_RETURN(TensorKernelArgs args, TensorKernelArgsOf(g, n, num_threads));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.find(&n);
  // A node at the same address from an earlier compile is another node.
  if (it != kernels_.end() && (it->second.op_type != n.op_type || it->second.name != n.name ||
                               it->second.attrs != n.named_attrs || it->second.inputs != args.inputs ||
                               it->second.outputs != args.outputs || it->second.constants != args.constants)) {
    kernels_.erase(it);
    it = kernels_.end();
  }
  if (it == kernels_.end()) {
    KILN_ASSIGN_OR_RETURN(TensorKernel kernel, MakeTensorKernel(args));
    std::vector<std::shared_ptr<const TensorData>> keep;
    for (ValueId in : n.inputs) {
      if (in != kNoValue && g.value(in).constant) keep.push_back(g.value(in).constant);
    }
    Entry e{n.op_type, n.name, n.named_attrs, args.inputs, args.outputs, args.constants, std::move(keep),
            std::move(kernel)};
    it = kernels_.emplace(&n, std::move(e)).first;
  }
  return &it->second.kernel;
}

void TensorKernelCache::Forget(const Node& n) {
  std::lock_guard<std::mutex> lock(mu_);
  kernels_.erase(&n);
}

Expected<Step> BindTensorOp(const BindContext& ctx, BindCaches& caches, Step step) {
  const Node& n = *ctx.node;
  KILN_ASSIGN_OR_RETURN(const TensorKernel* cached, caches.tensor_kernels.Get(*ctx.graph, n, TensorKernelThreads()));
  auto kernel = std::make_shared<TensorKernel>(*cached);
  caches.tensor_kernels.Forget(n);
  std::vector<BoundValue> ins = ctx.inputs, outs = ctx.outputs;
  uint8_t* scratch = ctx.scratch;
  if (kernel->scratch_bytes > 0 && scratch == nullptr) return Internal("{}: no scratch memory planned", n.name);
  const std::string name = n.name;
  step.kernel = kernel->impl;
  step.run = [kernel, ins, outs, scratch, name](const RunState& state) {
    // At most a handful of inputs and outputs: no allocation per call.
    const void* in_ptrs[16];
    void* out_ptrs[16];
    for (size_t i = 0; i < ins.size() && i < 16; ++i) in_ptrs[i] = ins[i].Resolve(state);
    for (size_t i = 0; i < outs.size() && i < 16; ++i) out_ptrs[i] = outs[i].Resolve(state);
    TensorCall call;
    call.inputs = in_ptrs;
    call.outputs = out_ptrs;
    call.scratch = scratch;
    call.pool = state.pool;
    Status s = kernel->run(call);
    if (!s.ok() && state.tensor_error != nullptr && state.tensor_error->ok()) *state.tensor_error = s;
  };
  if (ins.size() > 16 || outs.size() > 16) return Unsupported("{}: more than 16 inputs or outputs", name);
  return step;
}

}  // namespace kiln::cpu
