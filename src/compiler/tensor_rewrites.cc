// Legalize's tensor-graph rewrites.
#include "compiler/tensor_rewrites.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "backend/cpu/tensor_kernels/run_tensor_op.h"

namespace kiln {
namespace {

bool IsF32Constant(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).constant != nullptr && g.value(v).dtype == DType::kF32;
}

// Replaces every read of `from` with `to`.
void Redirect(Graph& g, ValueId from, ValueId to) {
  for (Node& n : g.nodes()) {
    for (ValueId& in : n.inputs) {
      if (in == from) in = to;
    }
  }
}

// Conv -> BatchNormalization (inference, constant parameters): the
// normalization's per-channel scale and shift go into the weights and bias.
int FoldBatchNorms(Graph& g, std::vector<std::string>* log) {
  int folded = 0;
  auto consumers = g.Consumers();
  for (Node& bn : g.nodes()) {
    if (bn.dead || bn.op != OpKind::kTensorOp || bn.op_type != "BatchNormalization" || bn.outputs.size() != 1 ||
        bn.inputs.size() != 5) {
      continue;
    }
    const ValueId x = bn.inputs[0];
    const Value& xv = g.value(x);
    if (xv.producer < 0 || xv.is_output || consumers[static_cast<size_t>(x)].size() != 1) continue;
    Node& conv = g.nodes()[static_cast<size_t>(xv.producer)];
    if (conv.op_type != "Conv" || conv.dead || conv.inputs.size() < 2 || !IsF32Constant(g, conv.inputs[1])) continue;
    bool constant_params = true;
    for (size_t i = 1; i < 5; ++i) constant_params = constant_params && IsF32Constant(g, bn.inputs[i]);
    if (!constant_params) continue;
    const bool has_bias = conv.inputs.size() >= 3 && conv.inputs[2] != kNoValue;
    if (has_bias && !IsF32Constant(g, conv.inputs[2])) continue;

    const TensorData& w = *g.value(conv.inputs[1]).constant;
    const int64_t oc = w.type().dims.empty() ? 0 : w.type().dims[0];
    const float* scale = g.value(bn.inputs[1]).constant->As<float>();
    const float* shift = g.value(bn.inputs[2]).constant->As<float>();
    const float* mean = g.value(bn.inputs[3]).constant->As<float>();
    const float* var = g.value(bn.inputs[4]).constant->As<float>();
    if (g.value(bn.inputs[1]).cols != oc) continue;
    const double eps = bn.named_attrs.Has("epsilon") ? *bn.named_attrs.Float("epsilon") : 1e-5;
    const int64_t per_oc = w.type().ElementCount() / std::max<int64_t>(oc, 1);
    std::vector<float> nw(static_cast<size_t>(w.type().ElementCount())), nb(static_cast<size_t>(oc));
    const float* old_b = has_bias ? g.value(conv.inputs[2]).constant->As<float>() : nullptr;
    for (int64_t o = 0; o < oc; ++o) {
      const double s = scale[o] / std::sqrt(static_cast<double>(var[o]) + eps);
      for (int64_t k = 0; k < per_oc; ++k) {
        nw[static_cast<size_t>(o * per_oc + k)] = static_cast<float>(w.As<float>()[o * per_oc + k] * s);
      }
      nb[static_cast<size_t>(o)] = static_cast<float>(((old_b ? old_b[o] : 0.0f) - mean[o]) * s + shift[o]);
    }
    ValueId new_w = g.AddConstant(g.value(conv.inputs[1]).name + ".bn_folded",
                                  TensorData::FromValues(DType::kF32, w.type().dims, nw));
    ValueId new_b = g.AddConstant(conv.name + ".bn_folded_bias", TensorData::FromValues(DType::kF32, {oc}, nb));
    Node& c = g.nodes()[static_cast<size_t>(g.value(x).producer)];
    c.inputs.resize(3);
    c.inputs[1] = new_w;
    c.inputs[2] = new_b;
    // The conv now writes what the normalization wrote.
    const ValueId y = bn.outputs[0];
    g.value(y).producer = g.value(x).producer;
    c.outputs[0] = y;
    c.fused_from.push_back(bn.name);
    bn.dead = true;
    log->push_back(fmt::format("BatchNormalization {} folded into Conv {}", bn.name, c.name));
    ++folded;
  }
  return folded;
}

// Identity and Dropout (inference) pass their input through.
int DropIdentities(Graph& g, std::vector<std::string>* log) {
  int dropped = 0;
  for (Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::kTensorOp) continue;
    const bool dropout = n.op_type == "Dropout" && n.outputs.size() == 1;
    if (n.op_type != "Identity" && !dropout) continue;
    const ValueId out = n.outputs[0];
    // A graph output is written by a node; keep the copy then.
    if (g.value(out).is_output || n.inputs.empty() || n.inputs[0] == kNoValue) continue;
    Redirect(g, out, n.inputs[0]);
    n.dead = true;
    log->push_back(fmt::format("{} {} removed", n.op_type, n.name));
    ++dropped;
  }
  return dropped;
}

// `axis` (or `axes`) attributes below zero, made non-negative against the
// rank of the input they index.
int NormalizeAxes(Graph& g, std::vector<std::string>* log) {
  int changed = 0;
  for (Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::kTensorOp || n.inputs.empty() || n.inputs[0] == kNoValue) continue;
    const int64_t rank = static_cast<int64_t>(g.value(n.inputs[0]).dims.size());
    // Unsqueeze's axes index the output; Concat's the (common) input rank.
    const int64_t axis_rank =
        n.op_type == "Unsqueeze" && !n.outputs.empty() ? static_cast<int64_t>(g.value(n.outputs[0]).dims.size()) : rank;
    bool touched = false;
    if (n.named_attrs.Has("axis")) {
      auto a = n.named_attrs.Int("axis");
      if (a.ok() && *a < 0 && *a >= -axis_rank) {
        n.named_attrs.SetInt("axis", *a + axis_rank);
        touched = true;
      }
    }
    if (n.named_attrs.Has("axes")) {
      auto a = n.named_attrs.Ints("axes");
      if (a.ok()) {
        std::vector<int64_t> axes = *a;
        bool neg = false;
        for (int64_t& x : axes) {
          if (x < 0 && x >= -axis_rank) {
            x += axis_rank;
            neg = true;
          }
        }
        if (neg) {
          n.named_attrs.SetInts("axes", axes);
          touched = true;
        }
      }
    }
    if (touched) {
      log->push_back(fmt::format("{} {}: negative axes made positive", n.op_type, n.name));
      ++changed;
    }
  }
  return changed;
}

// Nodes whose inputs all became constants (after the rewrites above) run
// once, here, on the CPU.
Status FoldConstants(Graph& g, std::vector<std::string>* log) {
  for (Node& n : g.nodes()) {
    // DequantizeLinear of int8 weights reaches here unfolded (the importer
    // keeps it for int8 fusions); what no fusion took becomes fp32 weights.
    if (n.dead || n.op != OpKind::kTensorOp || n.inputs.empty()) continue;
    bool all_constant = true;
    for (ValueId in : n.inputs) all_constant = all_constant && (in == kNoValue || g.value(in).constant != nullptr);
    if (!all_constant) continue;
    if (std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId o) { return g.value(o).is_output; })) continue;
    cpu::TensorOpRun run;
    run.op_type = n.op_type;
    run.node = n.name;
    run.attrs = n.named_attrs;
    run.num_outputs = static_cast<int>(n.outputs.size());
    if (n.opset > 0) run.opset = n.opset;
    run.inputs_are_constants = true;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) {
        run.inputs.emplace_back();
      } else {
        run.inputs.emplace_back(*g.value(in).constant);
      }
    }
    auto out = cpu::RunTensorOp(run);
    if (!out.ok()) continue;  // left to run as a node
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value& v = g.value(n.outputs[i]);
      v.constant = std::make_shared<const TensorData>(std::move((*out)[i]));
      v.producer = -1;
    }
    n.dead = true;
    log->push_back(fmt::format("{} {}: folded at compile time", n.op_type, n.name));
  }
  return Status::Ok();
}

}  // namespace

Status RewriteTensorGraph(Graph& g, std::vector<std::string>* log) {
  FoldBatchNorms(g, log);
  DropIdentities(g, log);
  NormalizeAxes(g, log);
  KILN_RETURN_IF_ERROR(FoldConstants(g, log));
  return g.Compact();
}

}  // namespace kiln
