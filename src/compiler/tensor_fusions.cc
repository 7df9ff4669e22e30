// Convolution epilogue fusion.
#include "compiler/tensor_fusions.h"

#include <algorithm>
#include <cmath>
#include <optional>

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

// The single f32 value of a constant, or nothing.
std::optional<float> ScalarConstant(const Graph& g, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const Value& c = g.value(v);
  if (!c.constant || c.dtype != DType::kF32 || c.constant->type().ElementCount() != 1) return std::nullopt;
  return c.constant->As<float>()[0];
}

// Clip's bounds, as attributes (opset < 11) or constant inputs; false when
// one is not a constant.
bool ClipBounds(const Graph& g, const Node& clip, double* lo, double* hi) {
  auto attr = [&](const char* name, double fallback) {
    auto v = clip.named_attrs.Float(name);
    return v.ok() ? *v : fallback;
  };
  *lo = attr("min", -3.4028234663852886e38);
  *hi = attr("max", 3.4028234663852886e38);
  for (size_t i = 1; i < clip.inputs.size() && i < 3; ++i) {
    if (clip.inputs[i] == kNoValue) continue;
    auto b = ScalarConstant(g, clip.inputs[i]);
    if (!b) return false;
    (i == 1 ? *lo : *hi) = *b;
  }
  return true;
}

// `n` is a binary `op` of `a` and a scalar constant equal to `value`
// (the constant on either side for Add and Mul, second for Div).
bool IsScalarOp(const Graph& g, const Node* n, const char* op, ValueId a, float value) {
  if (n == nullptr || n->op_type != op || n->inputs.size() != 2) return false;
  const bool commutes = n->op_type == "Add" || n->op_type == "Mul";
  ValueId other = kNoValue;
  if (n->inputs[0] == a) other = n->inputs[1];
  if (commutes && n->inputs[1] == a) other = n->inputs[0];
  auto c = ScalarConstant(g, other);
  return c && std::fabs(*c - value) <= 1e-6f * std::max(1.0f, std::fabs(value));
}

// `m` is Mul(x, s) or Mul(s, x).
bool IsProductOf(const Node* m, ValueId x, ValueId s) {
  return m != nullptr && m->op_type == "Mul" && m->inputs.size() == 2 &&
         ((m->inputs[0] == x && m->inputs[1] == s) || (m->inputs[0] == s && m->inputs[1] == x));
}

// A gated activation x * gate(x): the node among x's two readers that is
// not `gate`, when it is Mul(x, s).
Node* GateProduct(Graphview& gv, ValueId x, const Node* gate, ValueId s) {
  const auto& readers = gv.consumers[static_cast<size_t>(x)];
  if (readers.size() != 2) return nullptr;
  for (int32_t r : readers) {
    Node* m = &gv.g.nodes()[static_cast<size_t>(r)];
    if (m != gate && !m->dead && IsProductOf(m, x, s)) return m;
  }
  return nullptr;
}

// HardSwish as exporters write it out, starting at `n`, a reader of x:
//   Mul(x, HardSigmoid(x; 1/6, 1/2))                 (PyTorch below opset 14)
//   Mul(x, Clip(x + 3, 0, 6)) / 6, x * (Clip(x + 3, 0, 6) / 6), and the
//   forms with Mul(1/6) for Div(6)                    (Paddle, hand-written)
// The nodes after `n` that it takes go to `tail` (the last one writes the
// result); every intermediate value has one reader and is no graph output.
bool HardSwishFrom(Graphview& gv, ValueId x, Node* n, std::vector<Node*>* tail) {
  Graph& g = gv.g;
  auto alone = [&](const Node* k) { return gv.SoleReader(k->outputs[0]); };
  if (n->op_type == "HardSigmoid") {
    // ONNX's defaults: alpha 0.2, beta 0.5.
    auto alpha = n->named_attrs.Float("alpha"), beta = n->named_attrs.Float("beta");
    if (!alpha.ok() || std::fabs(*alpha - 1.0 / 6.0) > 1e-6 || (beta.ok() && std::fabs(*beta - 0.5) > 1e-6))
      return false;
    Node* m = GateProduct(gv, x, n, n->outputs[0]);
    if (m == nullptr || alone(n) != m) return false;
    tail->push_back(m);
    return true;
  }
  if (!IsScalarOp(g, n, "Add", x, 3.0f)) return false;
  Node* clip = alone(n);
  double lo = 0, hi = 0;
  if (clip == nullptr || clip->op_type != "Clip" || clip->inputs[0] != n->outputs[0] ||
      !ClipBounds(g, *clip, &lo, &hi) || lo != 0.0 || hi != 6.0)
    return false;
  auto is_sixth = [&](const Node* k, ValueId a) {
    return IsScalarOp(g, k, "Div", a, 6.0f) || IsScalarOp(g, k, "Mul", a, 1.0f / 6.0f);
  };
  Node* next = alone(clip);
  if (next == nullptr) return false;
  if (Node* m = GateProduct(gv, x, n, clip->outputs[0]); m == next) {
    Node* scale = alone(m);
    if (scale == nullptr || !is_sixth(scale, m->outputs[0])) return false;
    *tail = {clip, m, scale};
    return true;
  }
  if (!is_sixth(next, clip->outputs[0])) return false;
  Node* m = GateProduct(gv, x, n, next->outputs[0]);
  if (m == nullptr || alone(next) != m) return false;
  *tail = {clip, next, m};
  return true;
}

// The activation `n` computes from `x`, as kiln.FusedConv's attributes;
// false when it is not one FusedConv runs. Activations written as several
// nodes (SiLU, HardSwish) put the nodes after `n` in `tail`.
bool ActivationOf(Graphview& gv, ValueId x, Node* n, AttributeMap* attrs, std::vector<Node*>* tail) {
  Graph& g = gv.g;
  if (n == nullptr || n->op != OpKind::kTensorOp) return false;
  const std::string& op = n->op_type;
  auto attr_f = [&](const char* name, double fallback) {
    auto v = n->named_attrs.Float(name);
    return v.ok() ? *v : fallback;
  };
  if (HardSwishFrom(gv, x, n, tail)) {
    attrs->SetString("activation", "HardSwish");
    return true;
  }
  tail->clear();
  const bool sole = gv.consumers[static_cast<size_t>(x)].size() == 1;
  if (op == "Relu" || op == "Tanh" || op == "HardSwish") {
    attrs->SetString("activation", op);
    return sole;
  }
  if (op == "LeakyRelu") {
    attrs->SetString("activation", op);
    attrs->SetFloat("activation_alpha", attr_f("alpha", 0.01));
    return sole;
  }
  if (op == "HardSigmoid") {
    attrs->SetString("activation", op);
    attrs->SetFloat("activation_alpha", attr_f("alpha", 0.2));
    attrs->SetFloat("activation_beta", attr_f("beta", 0.5));
    return sole;
  }
  if (op == "Clip") {
    double lo = 0, hi = 0;
    if (!ClipBounds(g, *n, &lo, &hi)) return false;
    attrs->SetString("activation", "Clip");
    attrs->SetFloat("activation_alpha", lo);
    attrs->SetFloat("activation_beta", hi);
    return sole;
  }
  if (op == "Sigmoid") {
    // x * sigmoid(x) is SiLU when x has exactly these two readers.
    Node* m = GateProduct(gv, x, n, n->outputs[0]);
    if (m != nullptr && !g.value(n->outputs[0]).is_output && gv.SoleReader(n->outputs[0]) == m) {
      attrs->SetString("activation", "Silu");
      tail->push_back(m);
      return true;
    }
    attrs->SetString("activation", "Sigmoid");
    return sole;
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
    std::vector<Node*> tail;
    AttributeMap act_attrs;
    auto same_backend = [&](const Node* n) { return n->backend == conv.backend; };
    if (act != nullptr && act->backend == conv.backend && !g.value(out).is_output &&
        ActivationOf(gv, out, act, &act_attrs, &tail) && std::all_of(tail.begin(), tail.end(), same_backend)) {
      for (const auto& [k, v] : act_attrs.entries()) {
        if (const auto* s = std::get_if<std::string>(&v)) attrs.SetString(k, *s);
        if (const auto* d = std::get_if<double>(&v)) attrs.SetFloat(k, *d);
      }
      parts.push_back(act->name);
      absorbed.push_back(act);
      out = act->outputs[0];
      for (Node* n : tail) {
        parts.push_back(n->name);
        absorbed.push_back(n);
        out = n->outputs[0];
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
