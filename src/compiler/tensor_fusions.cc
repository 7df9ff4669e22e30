// Convolution epilogue fusion.
#include "compiler/tensor_fusions.h"

#include <fmt/format.h>

#include "backend/backend.h"
#include "compiler/channel_shuffle_fusion.h"
#include "compiler/transformer_fusions.h"

namespace kiln {
namespace {

constexpr const char* kFusedConv = "kiln.FusedConv";

struct Graphview {
  Graph& g;
  std::vector<std::vector<int32_t>> consumers;

  // The only reader of v, when v has exactly one and is no graph output.
  Node* SoleReader(ValueId v) {
    const auto& c = consumers[static_cast<size_t>(v)];
    if (c.size() != 1 || g.value(v).is_output) return nullptr;
    Node* n = &g.nodes()[static_cast<size_t>(c[0])];
    return n->dead ? nullptr : n;
  }
};

// The activation `n` computes from `x`, as kiln.FusedConv's attributes;
// false when it is not one FusedConv runs. `silu_mul` is set for SiLU's Mul.
bool ActivationOf(Graphview& gv, ValueId x, Node* n, AttributeMap* attrs, Node** silu_mul) {
  Graph& g = gv.g;
  if (n == nullptr || n->op != OpKind::kTensorOp) return false;
  const std::string& op = n->op_type;
  auto attr_f = [&](const char* name, double fallback) {
    auto v = n->named_attrs.Float(name);
    return v.ok() ? *v : fallback;
  };
  if (op == "Relu" || op == "Tanh" || op == "HardSwish") {
    attrs->SetString("activation", op);
    return true;
  }
  if (op == "LeakyRelu") {
    attrs->SetString("activation", op);
    attrs->SetFloat("activation_alpha", attr_f("alpha", 0.01));
    return true;
  }
  if (op == "HardSigmoid") {
    attrs->SetString("activation", op);
    attrs->SetFloat("activation_alpha", attr_f("alpha", 0.2));
    attrs->SetFloat("activation_beta", attr_f("beta", 0.5));
    return true;
  }
  if (op == "Clip") {
    // Bounds as attributes (opset < 11) or constant inputs.
    double lo = attr_f("min", -3.4028234663852886e38), hi = attr_f("max", 3.4028234663852886e38);
    for (size_t i = 1; i < n->inputs.size() && i < 3; ++i) {
      ValueId b = n->inputs[i];
      if (b == kNoValue) continue;
      const Value& bv = g.value(b);
      if (!bv.constant || bv.dtype != DType::kF32 || bv.cols != 1) return false;
      (i == 1 ? lo : hi) = bv.constant->As<float>()[0];
    }
    attrs->SetString("activation", "Clip");
    attrs->SetFloat("activation_alpha", lo);
    attrs->SetFloat("activation_beta", hi);
    return true;
  }
  if (op == "Sigmoid") {
    // x * sigmoid(x) is SiLU when x has exactly these two readers.
    const auto& readers = gv.consumers[static_cast<size_t>(x)];
    if (readers.size() == 2 && !g.value(n->outputs[0]).is_output) {
      for (int32_t r : readers) {
        Node* m = &g.nodes()[static_cast<size_t>(r)];
        if (m == n || m->op_type != "Mul" || m->inputs.size() != 2) continue;
        const ValueId s = n->outputs[0];
        const auto& s_readers = gv.consumers[static_cast<size_t>(s)];
        if (s_readers.size() == 1 && ((m->inputs[0] == x && m->inputs[1] == s) || (m->inputs[0] == s && m->inputs[1] == x))) {
          attrs->SetString("activation", "Silu");
          *silu_mul = m;
          return true;
        }
      }
    }
    attrs->SetString("activation", "Sigmoid");
    return gv.consumers[static_cast<size_t>(x)].size() == 1;
  }
  return false;
}

}  // namespace

Status FuseTensorOps(Graph& g, const BackendRegistry& backends, std::vector<std::string>* log) {
  Graphview gv{g, g.Consumers()};
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& conv = g.nodes()[i];
    if (conv.dead || conv.op != OpKind::kTensorOp || conv.op_type != "Conv" || conv.outputs.size() != 1) continue;
    Backend* b = backends.Find(conv.backend);
    if (b == nullptr || !b->support().SupportsTensorOp(kFusedConv)) continue;
    if (conv.inputs.empty() || g.value(conv.inputs[0]).dtype != DType::kF32) continue;

    AttributeMap attrs = conv.named_attrs;
    std::vector<std::string> parts = {conv.name};
    std::vector<ValueId> inputs = conv.inputs;
    inputs.resize(3, kNoValue);
    ValueId out = conv.outputs[0];
    std::vector<Node*> absorbed;

    // Conv -> Add(residual): the other operand must have the output's type
    // (no broadcasting) and be ready before the conv runs.
    if (Node* add = gv.SoleReader(out); add != nullptr && add->op_type == "Add" && add->inputs.size() == 2 &&
                                        add->backend == conv.backend) {
      const ValueId other = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
      const Value& ov = g.value(other);
      const bool ready = ov.is_preset() || (ov.producer >= 0 && static_cast<size_t>(ov.producer) < i);
      if (other != out && ready && ov.tensor_type() == g.value(out).tensor_type()) {
        inputs.push_back(other);
        attrs.SetInt("residual_before_activation", 1);
        parts.push_back(add->name);
        absorbed.push_back(add);
        out = add->outputs[0];
      }
    }
    // -> activation.
    Node* act = nullptr;
    for (int32_t r : gv.consumers[static_cast<size_t>(out)]) {
      act = &g.nodes()[static_cast<size_t>(r)];
      if (act->dead) act = nullptr;
      break;
    }
    Node* silu_mul = nullptr;
    AttributeMap act_attrs;
    if (act != nullptr && act->backend == conv.backend && !g.value(out).is_output &&
        ActivationOf(gv, out, act, &act_attrs, &silu_mul) &&
        (silu_mul != nullptr || gv.consumers[static_cast<size_t>(out)].size() == 1)) {
      for (const auto& [k, v] : act_attrs.entries()) {
        if (const auto* s = std::get_if<std::string>(&v)) attrs.SetString(k, *s);
        if (const auto* d = std::get_if<double>(&v)) attrs.SetFloat(k, *d);
      }
      parts.push_back(act->name);
      absorbed.push_back(act);
      out = act->outputs[0];
      if (silu_mul != nullptr) {
        parts.push_back(silu_mul->name);
        absorbed.push_back(silu_mul);
        out = silu_mul->outputs[0];
      }
    }
    if (absorbed.empty()) {
      // A lone Conv also runs as FusedConv (bias in the epilogue); no log line.
      continue;
    }
    conv.op_type = kFusedConv;
    conv.named_attrs = std::move(attrs);
    conv.inputs = std::move(inputs);
    conv.outputs = {out};
    for (Node* n : absorbed) {
      conv.fused_from.push_back(n->name);
      n->dead = true;
    }
    log->push_back(fmt::format("conv epilogue: {}", fmt::join(parts, " + ")));
  }
  KILN_RETURN_IF_ERROR(FuseChannelShuffles(g, backends, log));
  KILN_RETURN_IF_ERROR(FuseTransformerPatterns(g, backends, log));
  return g.Compact();
}

}  // namespace kiln
