// The bind stage.
#include "compiler/bind.h"

#include <fmt/format.h>

#include "format/weight_store.h"

namespace kiln {

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
    const Value& v = g.value(id);
    BoundValue b;
    b.cols = v.cols;
    b.dtype = v.dtype;
    b.rows = v.rows;
    b.is_output = v.is_output;
    b.row_stride = g.RowStride(id);
    if (v.is_marker() || v.is_output) return b;
    ValueId s = g.StorageOf(id);
    auto slot = plan.values.find(s);
    if (slot == plan.values.end()) return Internal("bind: value {} has no buffer", v.name);
    auto base = in.arena_base.find(slot->second.domain);
    if (base == in.arena_base.end()) return Internal("bind: no arena for domain {}", slot->second.domain);
    auto col_bytes = DTypeBytes(v.dtype, static_cast<uint64_t>(v.col_offset));
    b.data = base->second + slot->second.offset + (col_bytes ? *col_bytes : 0);
    return b;
  };

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
      if (w != nullptr && w->shape.size() == 2 && (n.op == OpKind::kLinear || n.op == OpKind::kGateUpSiluMul)) {
        m = in.packed->Find(n.backend, w->name);
        if (m == nullptr) return Internal("bind: weight {} not packed for {}", w->name, n.backend);
      }
      ctx.packed.push_back(m);
    }
    auto step = backend->Bind(ctx);
    if (!step.ok()) return step.status().WithContext(fmt::format("binding {} ({})", n.name, OpName(n.op)));
    steps.push_back(std::move(*step));
    step_outputs.push_back(std::move(outs));
  }
  return std::make_unique<Program>(plan.env, std::move(steps), std::move(step_outputs));
}

}  // namespace kiln
