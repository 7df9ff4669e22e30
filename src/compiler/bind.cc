// The bind stage.
#include "compiler/bind.h"

#include <fmt/format.h>

#include "format/weight_store.h"

namespace kiln {
namespace {

// A transfer is an explicit copy, enqueued on the stream of its device
// side: the receiving device for host to device, the sending device for
// device to host (so that the host waits for it through an event).
Expected<Step> BindTransfer(const BindContext& ctx, const std::map<int32_t, Backend*>& owners) {
  const BoundValue x = ctx.inputs.at(0), o = ctx.outputs.at(0);
  const int32_t host = HostMemory().id();
  const int32_t from = x.domain, to = o.is_output ? host : o.domain;
  auto owner = [&](int32_t d) -> Backend* {
    auto it = owners.find(d);
    return it == owners.end() ? nullptr : it->second;
  };
  Backend* executor = nullptr;
  CopyDirection direction = CopyDirection::kWithinDevice;
  if (from == to) {
    executor = owner(from);
  } else if (from == host) {
    executor = owner(to);
    direction = CopyDirection::kHostToDevice;
  } else if (to == host) {
    executor = owner(from);
    direction = CopyDirection::kDeviceToHost;
  } else {
    return Unsupported("transfer between two devices' memories (domains {} and {}) is not supported", from, to);
  }
  if (executor == nullptr) return Internal("transfer: no backend owns memory domain {}", from == host ? to : from);
  auto elem = DTypeBytes(x.dtype, 1);
  if (!elem || x.dtype != o.dtype) return Internal("transfer: dtype {} to {}", DTypeName(x.dtype), DTypeName(o.dtype));
  const size_t e = static_cast<size_t>(*elem);
  const size_t row_bytes = static_cast<size_t>(x.cols) * e;
  Step step;
  step.name = ctx.node->name;
  step.op = OpKind::kTransfer;
  step.backend = ctx.node->backend;
  step.executor = executor;
  step.enqueue = [=](const RunState& s) {
    RowCopy c;
    // A tensor graph's inputs and outputs are the caller's buffers of this
    // run; an LLM's output is its logits.
    const bool logits = o.is_output && o.io_slot < 0;
    c.dst = o.io_slot >= 0 ? static_cast<void*>(o.Resolve(s)) : logits ? static_cast<void*>(s.logits) : o.data;
    c.dst_pitch = static_cast<size_t>(logits ? s.logits_stride : o.row_stride) * e;
    c.src = x.Resolve(s);
    c.src_pitch = static_cast<size_t>(x.row_stride) * e;
    c.row_bytes = row_bytes;
    c.rows = static_cast<size_t>(s.RowsIn(x.rows));
    if (c.rows > 0) executor->EnqueueCopy(direction, c);
  };
  return step;
}

}  // namespace

std::vector<size_t> ScratchNeeds(const Graph& g, const BackendRegistry& backends, const ShapeEnv& env) {
  std::vector<size_t> needs(g.nodes().size(), 0);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (Backend* b = backends.Find(n.backend)) needs[i] = b->ScratchBytes(g, n, env);
  }
  return needs;
}

Expected<std::unique_ptr<Program>> BindProgram(const BindInputs& in) {
  const Graph& g = *in.graph;
  const MemoryPlan& plan = *in.plan;
  auto bound = [&](ValueId id) -> Expected<BoundValue> {
    if (id == kNoValue) return BoundValue{};  // an omitted optional input
    const Value& v = g.value(id);
    BoundValue b = ShapeOf(g, id);
    b.io_slot = v.io_slot;
    if (v.constant) {
      // Kernels only read their inputs; the constant's bytes are shared.
      b.data = const_cast<uint8_t*>(v.constant->data());
      return b;
    }
    if (v.is_marker() || v.is_output || v.io_slot >= 0) return b;
    ValueId s = g.StorageOf(id);
    auto slot = plan.values.find(s);
    if (slot == plan.values.end() && v.is_tensor() && v.cols == 0) {
      // An empty tensor: no bytes planned; kernels get an address they never read.
      alignas(64) static uint8_t empty[64];
      b.data = empty;
      return b;
    }
    if (slot == plan.values.end()) return Internal("bind: value {} has no buffer", v.name);
    auto base = in.arena_base.find(slot->second.domain);
    if (base == in.arena_base.end()) return Internal("bind: no arena for domain {}", slot->second.domain);
    auto col_bytes = DTypeBytes(v.dtype, static_cast<uint64_t>(v.col_offset));
    b.data = base->second + slot->second.offset + (col_bytes ? *col_bytes : 0);
    b.domain = slot->second.domain;
    return b;
  };
  std::map<int32_t, Backend*> owners;
  for (Backend* b : in.backends->All()) owners.emplace(b->domain().id(), b);

  std::vector<Step> steps;
  std::vector<std::vector<std::pair<std::string, BoundValue>>> step_outputs;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    Backend* backend = in.backends->Find(n.backend);
    if (backend == nullptr) return Internal("bind: node {} on unknown backend {}", n.name, n.backend);
    BindContext ctx;
    ctx.graph = &g;
    ctx.node = &n;
    ctx.kv_layout = in.kv_layout;
    ctx.max_positions = in.max_positions;
    ctx.capacity = plan.env;
    for (ValueId v : n.inputs) {
      KILN_ASSIGN_OR_RETURN(BoundValue b, bound(v));
      ctx.inputs.push_back(b);
    }
    std::vector<std::pair<std::string, BoundValue>> outs;
    for (ValueId v : n.outputs) {
      KILN_ASSIGN_OR_RETURN(BoundValue b, bound(v));
      ctx.outputs.push_back(b);
      outs.emplace_back(g.value(v).name, b);
    }
    auto scratch = plan.scratch.find(static_cast<int32_t>(i));
    if (scratch != plan.scratch.end()) {
      ctx.scratch = in.arena_base.at(scratch->second.domain) + scratch->second.offset;
    }
    for (const Weight* w : n.weights) {
      const PackedMatrix* m = nullptr;
      if (w != nullptr && w->shape.size() == 2 &&
          (n.op == OpKind::kLinear || n.op == OpKind::kGateUpSiluMul || n.op == OpKind::kMoe)) {
        m = in.packed->Find(n.backend, w->name);
        if (m == nullptr) return Internal("bind: weight {} not packed for {}", w->name, n.backend);
      }
      ctx.packed.push_back(m);
    }
    auto step = n.op == OpKind::kTransfer ? BindTransfer(ctx, owners) : backend->Bind(ctx);
    if (!step.ok()) return step.status().WithContext(fmt::format("binding {} ({})", n.name, OpName(n.op)));
    if (step->executor == nullptr) step->executor = backend;
    if (n.op == OpKind::kKvWrite) step->kv_layer = static_cast<int32_t>(n.attrs.layer);
    steps.push_back(std::move(*step));
    step_outputs.push_back(std::move(outs));
  }
  std::vector<ArenaSpan> arenas;
  for (const auto& [d, bytes] : plan.arena_bytes) {
    auto base = in.arena_base.find(d);
    auto owner = owners.find(d);
    if (base == in.arena_base.end() || owner == owners.end()) return Internal("bind: no arena for domain {}", d);
    arenas.push_back({owner->second, base->second, bytes});
  }
  return std::make_unique<Program>(plan.env, std::move(steps), std::move(step_outputs), std::move(arenas),
                                   std::move(owners), &g);
}

}  // namespace kiln
