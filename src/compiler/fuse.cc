// The fusion and precision passes.
#include "compiler/fuse.h"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "backend/backend.h"
#include "format/weight_store.h"

namespace kiln {

namespace {

bool IsMatrixLinear(const Node& n) {
  return n.op == OpKind::kLinear && !n.dead && n.weights.size() == 2 && n.weights[0] != nullptr &&
         n.weights[0]->shape.size() == 2;
}

// "model.layers.0.self_attn.{q_proj,k_proj,v_proj}".
std::string GroupName(const std::vector<const Node*>& nodes) {
  std::string common = nodes[0]->name;
  for (const Node* n : nodes) {
    size_t i = 0;
    while (i < common.size() && i < n->name.size() && common[i] == n->name[i]) ++i;
    common.resize(i);
  }
  size_t dot = common.rfind('.');
  common.resize(dot == std::string::npos ? 0 : dot + 1);
  std::string parts;
  for (const Node* n : nodes) parts += (parts.empty() ? "" : ",") + n->name.substr(common.size());
  return common + "{" + parts + "}";
}

// Linears that read the same value, on the same backend, with weights of
// one dtype and the same attributes, become one linear writing one buffer;
// the old outputs become column views of it.
void FuseSiblingLinears(Graph& g, FuseReport* report) {
  std::map<std::pair<ValueId, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (IsMatrixLinear(n) && g.value(n.outputs[0]).view_of == kNoValue) {
      groups[{n.inputs[0], n.backend}].push_back(i);
    }
  }
  for (auto& [key, members] : groups) {
    // Split by weight dtype (one kernel call takes one weight format) and
    // by attributes (the fused node keeps them).
    std::map<std::pair<DType, AttributeMap>, std::vector<size_t>> by_kind;
    for (size_t i : members) {
      const Node& n = g.nodes()[i];
      by_kind[{n.weights[0]->dtype, n.named_attrs}].push_back(i);
    }
    for (auto& [kind, idx] : by_kind) {
      if (idx.size() < 2) continue;
      std::vector<const Node*> nodes;
      for (size_t i : idx) nodes.push_back(&g.nodes()[i]);
      int64_t total = 0;
      for (const Node* n : nodes) total += g.value(n->outputs[0]).cols;
      const Value& first_out = g.value(nodes[0]->outputs[0]);
      std::string name = GroupName(nodes);
      ValueId fused_out = g.AddValue(name, first_out.dtype, first_out.rows, total);

      Node fused;
      fused.op = OpKind::kLinear;
      fused.name = name;
      fused.inputs = nodes[0]->inputs;
      fused.outputs = {fused_out};
      fused.named_attrs = nodes[0]->named_attrs;
      fused.backend = nodes[0]->backend;
      std::vector<const Weight*> mats, biases;
      int64_t offset = 0;
      for (const Node* n : nodes) {
        mats.push_back(n->weights[0]);
        biases.push_back(n->weights[1]);
        fused.fused_from.push_back(n->name);
        Value& out = g.value(n->outputs[0]);
        out.view_of = fused_out;
        out.col_offset = offset;
        offset += out.cols;
      }
      fused.weights = mats;
      fused.weights.insert(fused.weights.end(), biases.begin(), biases.end());
      report->fusions.push_back(fmt::format("linear x{}: {}", nodes.size(), name));
      size_t at = idx[0];
      for (size_t i : idx) g.nodes()[i].dead = true;
      g.nodes()[at] = std::move(fused);
    }
  }
}

// linear(x; Wg, Wu) -> silu_mul(view gate, view up) becomes
// gate_up_silu_mul(x; Wg, Wu).
void FuseGateUpActivation(Graph& g, FuseReport* report) {
  auto consumers = g.Consumers();
  for (Node& act : g.nodes()) {
    if (act.dead || act.op != OpKind::kSiluMul) continue;
    const Value& gate = g.value(act.inputs[0]);
    const Value& up = g.value(act.inputs[1]);
    if (gate.view_of == kNoValue || gate.view_of != up.view_of) continue;
    ValueId base = gate.view_of;
    const Value& base_v = g.value(base);
    if (gate.col_offset != 0 || up.col_offset != gate.cols || base_v.cols != gate.cols + up.cols) continue;
    Node& lin = g.nodes()[static_cast<size_t>(base_v.producer)];
    if (lin.op != OpKind::kLinear || lin.weights.size() != 4 || lin.backend != act.backend) continue;
    // The gate and up views must have no reader but this activation.
    bool only_reader = true;
    for (size_t v = 0; v < g.values().size(); ++v) {
      if (g.StorageOf(static_cast<ValueId>(v)) != base) continue;
      for (int32_t c : consumers[v]) {
        if (&g.nodes()[static_cast<size_t>(c)] != &act) only_reader = false;
      }
    }
    if (!only_reader) continue;
    AttributeMap attrs = lin.named_attrs;
    if (!attrs.Merge(act.named_attrs)) continue;
    Node fused;
    fused.op = OpKind::kGateUpSiluMul;
    fused.name = act.name;
    fused.inputs = lin.inputs;
    fused.outputs = act.outputs;
    fused.weights = lin.weights;
    fused.named_attrs = std::move(attrs);
    fused.backend = act.backend;
    fused.fused_from = lin.fused_from;
    fused.fused_from.push_back(act.name);
    report->fusions.push_back(fmt::format("gate_up_silu_mul: {} + {}", lin.name, act.name));
    lin.dead = true;
    act = std::move(fused);
  }
}

// add(a, b) -> rms_norm(sum) becomes add_rms_norm(b, a) -> (normed, sum).
void FuseAddNorm(Graph& g, FuseReport* report) {
  auto consumers = g.Consumers();
  auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& add = nodes[i];
    if (add.dead || add.op != OpKind::kAdd) continue;
    ValueId sum = add.outputs[0];
    // The first norm reading the sum, with nothing else reading it in between.
    int32_t norm_index = -1;
    for (int32_t c : consumers[static_cast<size_t>(sum)]) {
      const Node& n = nodes[static_cast<size_t>(c)];
      if (n.op == OpKind::kRmsNorm && n.attrs.group == 0 && n.backend == add.backend && !n.dead) {
        norm_index = c;
      }
      break;
    }
    if (norm_index < 0) continue;
    Node& norm = nodes[static_cast<size_t>(norm_index)];
    AttributeMap attrs = norm.named_attrs;
    if (!attrs.Merge(add.named_attrs)) continue;
    Node fused;
    fused.op = OpKind::kAddRmsNorm;
    fused.name = norm.name;
    fused.inputs = {add.inputs[1], add.inputs[0]};  // (x, residual)
    fused.outputs = {norm.outputs[0], sum};
    fused.weights = norm.weights;
    fused.attrs = norm.attrs;
    fused.named_attrs = std::move(attrs);
    fused.backend = norm.backend;
    fused.fused_from = {add.name, norm.name};
    report->fusions.push_back(fmt::format("add_rms_norm: {} + {}", add.name, norm.name));
    // The fused node runs where the norm ran; the add's readers between the
    // two are none (checked above), so moving the add later is safe.
    add.dead = true;
    norm = std::move(fused);
  }
}

// Inserts cast(x -> bf16) before the matmuls `wants_bf16` selects, one cast
// per (value, backend).
int CastMatmulInputs(Graph& g, const std::function<bool(const Node&)>& wants_bf16) {
  std::map<std::pair<ValueId, std::string>, ValueId> casts;
  std::vector<Node> out;
  int inserted = 0;
  for (Node& n : g.nodes()) {
    if (n.dead) continue;
    bool matmul = n.op == OpKind::kLinear || n.op == OpKind::kGateUpSiluMul;
    if (matmul && wants_bf16(n) && g.value(n.inputs[0]).dtype == DType::kF32) {
      auto key = std::make_pair(n.inputs[0], n.backend);
      auto it = casts.find(key);
      if (it == casts.end()) {
        const Value& src = g.value(n.inputs[0]);
        ValueId c = g.AddValue(src.name + ".bf16", DType::kBF16, src.rows, src.cols);
        Node cast;
        cast.op = OpKind::kCast;
        cast.name = n.name + ".cast_bf16";
        cast.inputs = {n.inputs[0]};
        cast.outputs = {c};
        cast.attrs.cast_to = DType::kBF16;
        cast.backend = n.backend;
        out.push_back(std::move(cast));
        it = casts.emplace(key, c).first;
        ++inserted;
      }
      n.inputs[0] = it->second;
    }
    out.push_back(std::move(n));
  }
  g.nodes() = std::move(out);
  return inserted;
}

}  // namespace

Status Fuse(Graph& g, const BackendRegistry& backends, const FuseOptions& options, FuseReport* report) {
  if (options.fuse_linears) {
    FuseSiblingLinears(g, report);
    KILN_RETURN_IF_ERROR(g.Compact());
  }
  if (options.fuse_gate_up_act) {
    FuseGateUpActivation(g, report);
    KILN_RETURN_IF_ERROR(g.Compact());
  }
  if (options.fuse_add_norm) {
    FuseAddNorm(g, report);
    KILN_RETURN_IF_ERROR(g.Compact());
  }

  auto backend_of = [&](const Node& n) { return backends.Find(n.backend); };
  switch (options.precision) {
    case Precision::kFp32:
      report->precision.push_back("fp32: every activation fp32");
      break;
    case Precision::kMixed: {
      int casts = CastMatmulInputs(g, [&](const Node& n) {
        Backend* b = backend_of(n);
        return b != nullptr && b->has_native_bf16_dot() && n.weights[0] != nullptr &&
               n.weights[0]->dtype == DType::kBF16;
      });
      report->casts_inserted += casts;
      if (casts > 0) {
        report->precision.push_back(fmt::format("mixed: {} bf16-weight matmuls take bf16 inputs", casts));
      } else {
        report->precision.push_back(
            "mixed: no backend here multiplies bf16 natively (or no bf16 weights); matmul inputs stay fp32");
      }
      break;
    }
    case Precision::kBf16: {
      int casts = CastMatmulInputs(g, [&](const Node& n) {
        Backend* b = backend_of(n);
        return b != nullptr;  // every backend's linear takes bf16 inputs (checked by Bind)
      });
      report->casts_inserted += casts;
      report->precision.push_back(fmt::format("bf16: {} matmul inputs rounded to bf16", casts));
      break;
    }
  }
  report->precision.push_back("norms, softmax, RoPE and accumulations: fp32");
  return g.Compact();
}

}  // namespace kiln
