#include "compiler/transformer_fusions.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "backend/backend.h"

namespace kiln {
namespace {

class Matcher {
 public:
  Matcher(Graph& g, const BackendRegistry& backends) : g_(g), backends_(backends), consumers_(g.Consumers()) {}

  Graph& g() { return g_; }

  // The only live reader of v when v has exactly one and is no graph output.
  Node* SoleReader(ValueId v) {
    const auto& c = Readers(v);
    if (c.size() != 1 || g_.value(v).is_output) return nullptr;
    Node* n = &g_.nodes()[static_cast<size_t>(c[0])];
    return n->dead ? nullptr : n;
  }
  // Readers as the graph was when matching began (constants added since have none).
  const std::vector<int32_t>& Readers(ValueId v) const {
    static const std::vector<int32_t> kNone;
    return static_cast<size_t>(v) < consumers_.size() ? consumers_[static_cast<size_t>(v)] : kNone;
  }

  // v's single reader, when it is a live `op` node on `backend`.
  Node* SoleReaderOp(ValueId v, const char* op, const std::string& backend) {
    Node* n = SoleReader(v);
    return n != nullptr && n->op == OpKind::kTensorOp && n->op_type == op && n->backend == backend ? n : nullptr;
  }

  bool BackendHas(const std::string& backend, const char* op) const {
    const Backend* b = backends_.Find(backend);
    return b != nullptr && b->support().SupportsTensorOp(op);
  }

  // The value of a constant f32 scalar (any shape of one element).
  std::optional<float> Scalar(ValueId v) const {
    if (v == kNoValue) return std::nullopt;
    const Value& val = g_.value(v);
    if (!val.constant || val.dtype != DType::kF32 || val.constant->type().ElementCount() != 1) return std::nullopt;
    return val.constant->As<float>()[0];
  }

  // The operand of binary `n` other than `v` (kNoValue unless v is one).
  static ValueId Other(const Node& n, ValueId v) {
    if (n.inputs.size() != 2) return kNoValue;
    if (n.inputs[0] == v) return n.inputs[1];
    if (n.inputs[1] == v) return n.inputs[0];
    return kNoValue;
  }

 private:
  Graph& g_;
  const BackendRegistry& backends_;
  std::vector<std::vector<int32_t>> consumers_;
};

bool Near(std::optional<float> v, double want) { return v && std::fabs(*v - want) <= 1e-5 * std::fabs(want); }

// A ReduceMean over the last axis of its input alone, keeping the axis.
bool IsLastAxisMean(Matcher& m, const Node& n) {
  if (n.op_type != "ReduceMean" || n.inputs.empty()) return false;
  const int64_t rank = static_cast<int64_t>(m.g().value(n.inputs[0]).dims.size());
  auto keep = n.named_attrs.Int("keepdims");
  if (keep.ok() && *keep == 0) return false;
  std::vector<int64_t> axes;
  if (auto a = n.named_attrs.Ints("axes"); a.ok()) {
    axes = *a;
  } else if (n.inputs.size() > 1 && n.inputs[1] != kNoValue && m.g().value(n.inputs[1]).constant) {
    auto c = m.g().value(n.inputs[1]).constant->ToInt64s();
    if (!c.ok()) return false;
    axes = *c;
  } else {
    return false;
  }
  return axes.size() == 1 && (axes[0] == rank - 1 || axes[0] == -1);
}

// A constant f32 of exactly `c` elements, all but the last axis of size 1:
// as a [c] tensor.
std::optional<TensorData> RowConstant(Matcher& m, ValueId v, int64_t c) {
  if (v == kNoValue) return std::nullopt;
  const Value& val = m.g().value(v);
  if (!val.constant || val.dtype != DType::kF32 || val.dims.empty() || val.dims.back() != c) return std::nullopt;
  for (size_t i = 0; i + 1 < val.dims.size(); ++i) {
    if (val.dims[i] != 1) return std::nullopt;
  }
  if (val.dims.size() == 1) return *val.constant;
  return TensorData(TensorType{DType::kF32, {c}},
                    std::make_shared<std::string>(reinterpret_cast<const char*>(val.constant->data()),
                                                  val.constant->bytes()));
}

bool FuseLayerNorm(Matcher& m, Node& mean, std::vector<std::string>* log) {
  Graph& g = m.g();
  if (!IsLastAxisMean(m, mean)) return false;
  const std::string& be = mean.backend;
  const ValueId x = mean.inputs[0];
  if (g.value(x).dtype != DType::kF32 || g.value(x).dims.empty()) return false;
  const int64_t c = g.value(x).dims.back();
  Node* sub = m.SoleReaderOp(mean.outputs[0], "Sub", be);
  if (sub == nullptr || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) return false;
  const ValueId d = sub->outputs[0];
  if (g.value(d).is_output || m.Readers(d).size() != 2) return false;
  Node* sq = nullptr;
  Node* div = nullptr;
  for (int32_t r : m.Readers(d)) {
    Node* n = &g.nodes()[static_cast<size_t>(r)];
    if (n->dead || n->backend != be) return false;
    if (n->op_type == "Pow" && n->inputs.size() == 2 && n->inputs[0] == d && Near(m.Scalar(n->inputs[1]), 2.0)) {
      sq = n;
    } else if (n->op_type == "Mul" && n->inputs.size() == 2 && n->inputs[0] == d && n->inputs[1] == d) {
      sq = n;
    } else if (n->op_type == "Div" && n->inputs.size() == 2 && n->inputs[0] == d) {
      div = n;
    }
  }
  if (sq == nullptr || div == nullptr) return false;
  Node* var = m.SoleReader(sq->outputs[0]);
  if (var == nullptr || var->backend != be || !IsLastAxisMean(m, *var) || var->inputs[0] != sq->outputs[0]) return false;
  Node* add_eps = m.SoleReaderOp(var->outputs[0], "Add", be);
  if (add_eps == nullptr) return false;
  std::optional<float> eps = m.Scalar(Matcher::Other(*add_eps, var->outputs[0]));
  if (!eps || !(*eps >= 0)) return false;
  Node* root = m.SoleReaderOp(add_eps->outputs[0], "Sqrt", be);
  if (root == nullptr || m.SoleReader(root->outputs[0]) != div || div->inputs[1] != root->outputs[0]) return false;

  std::vector<Node*> pattern = {&mean, sub, sq, var, add_eps, root, div};
  Node* last = div;
  std::optional<TensorData> scale, bias;
  if (Node* mul = m.SoleReaderOp(div->outputs[0], "Mul", be)) {
    if ((scale = RowConstant(m, Matcher::Other(*mul, div->outputs[0]), c))) {
      pattern.push_back(mul);
      last = mul;
      if (Node* add = m.SoleReaderOp(mul->outputs[0], "Add", be)) {
        if ((bias = RowConstant(m, Matcher::Other(*add, mul->outputs[0]), c))) {
          pattern.push_back(add);
          last = add;
        }
      }
    }
  }
  // The output keeps the pattern's dims only when nothing broadcast it wider.
  if (g.value(last->outputs[0]).dims != g.value(x).dims || !m.BackendHas(be, "LayerNormalization")) return false;
  if (!scale) scale = TensorData::FromValues(DType::kF32, {c}, std::vector<float>(static_cast<size_t>(c), 1.0f));
  const std::string name = last->name;
  std::vector<ValueId> inputs = {x, g.AddConstant(name + ".scale", *scale)};
  if (bias) inputs.push_back(g.AddConstant(name + ".bias", *bias));
  // `last` becomes the fused node: x and the constants are ready before it.
  const std::string last_op = last->op_type;
  for (Node* n : pattern) {
    if (n != last) {
      last->fused_from.push_back(n->name);
      n->dead = true;
    }
  }
  last->fused_from.push_back(name + " (" + last_op + ")");
  last->op_type = "LayerNormalization";
  last->inputs = std::move(inputs);
  last->named_attrs = AttributeMap();
  last->named_attrs.SetInt("axis", static_cast<int64_t>(g.value(x).dims.size()) - 1);
  last->named_attrs.SetFloat("epsilon", *eps);
  log->push_back(fmt::format("layer norm: {} .. {} -> LayerNormalization", mean.name, name));
  return true;
}

bool FuseGelu(Matcher& m, Node& erf, std::vector<std::string>* log) {
  Graph& g = m.g();
  if (erf.op_type != "Erf" || erf.inputs.size() != 1) return false;
  const std::string& be = erf.backend;
  const Value& t = g.value(erf.inputs[0]);
  if (t.producer < 0) return false;
  Node* scale = &g.nodes()[static_cast<size_t>(t.producer)];
  if (scale->dead || scale->backend != be || scale->inputs.size() != 2 || m.SoleReader(erf.inputs[0]) != &erf) return false;
  const ValueId x = scale->inputs[0];
  const bool by_div = scale->op_type == "Div" && Near(m.Scalar(scale->inputs[1]), std::sqrt(2.0));
  const bool by_mul = scale->op_type == "Mul" && Near(m.Scalar(scale->inputs[1]), std::sqrt(0.5));
  if (!by_div && !by_mul) return false;
  Node* plus1 = m.SoleReaderOp(erf.outputs[0], "Add", be);
  if (plus1 == nullptr || !Near(m.Scalar(Matcher::Other(*plus1, erf.outputs[0])), 1.0)) return false;
  Node* mul1 = m.SoleReaderOp(plus1->outputs[0], "Mul", be);
  if (mul1 == nullptr) return false;
  const ValueId other = Matcher::Other(*mul1, plus1->outputs[0]);
  std::vector<Node*> pattern = {scale, &erf, plus1, mul1};
  Node* last = mul1;
  if (other == x) {
    // x * (1 + erf) * 0.5
    Node* half = m.SoleReaderOp(mul1->outputs[0], "Mul", be);
    if (half == nullptr || !Near(m.Scalar(Matcher::Other(*half, mul1->outputs[0])), 0.5)) return false;
    pattern.push_back(half);
    last = half;
  } else {
    // (x * 0.5) * (1 + erf)
    if (other == kNoValue || g.value(other).producer < 0 || m.SoleReader(other) != mul1) return false;
    Node* half = &g.nodes()[static_cast<size_t>(g.value(other).producer)];
    if (half->dead || half->op_type != "Mul" || half->backend != be || !Near(m.Scalar(Matcher::Other(*half, x)), 0.5))
      return false;
    pattern.push_back(half);
  }
  if (g.value(last->outputs[0]).dims != g.value(x).dims || g.value(x).dtype != DType::kF32 || !m.BackendHas(be, "Gelu"))
    return false;
  const std::string last_name = last->name, last_op = last->op_type;
  for (Node* n : pattern) {
    if (n != last) {
      last->fused_from.push_back(n->name);
      n->dead = true;
    }
  }
  last->fused_from.push_back(last_name + " (" + last_op + ")");
  last->op_type = "Gelu";
  last->inputs = {x};
  last->named_attrs = AttributeMap();
  last->named_attrs.SetString("approximate", "none");
  log->push_back(fmt::format("gelu: {} .. {} -> Gelu", scale->name, last_name));
  return true;
}

bool FuseMatMulBias(Matcher& m, Node& mm, std::vector<std::string>* log) {
  Graph& g = m.g();
  if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1) return false;
  const Value& out = g.value(mm.outputs[0]);
  if (out.dtype != DType::kF32 || out.dims.empty()) return false;
  Node* add = m.SoleReaderOp(mm.outputs[0], "Add", mm.backend);
  if (add == nullptr) return false;
  const ValueId b = Matcher::Other(*add, mm.outputs[0]);
  const std::optional<TensorData> row = RowConstant(m, b, out.dims.back());
  if (!row || g.value(b).dims.size() > out.dims.size() || !m.BackendHas(mm.backend, "kiln.FusedMatMul")) return false;
  mm.op_type = "kiln.FusedMatMul";
  mm.inputs.push_back(g.value(b).dims.size() == 1 ? b : g.AddConstant(add->name + ".bias", *row));
  mm.outputs = add->outputs;
  mm.fused_from.push_back(add->name);
  add->dead = true;
  log->push_back(fmt::format("matmul bias: {} + {}", mm.name, add->name));
  return true;
}

}  // namespace

Status FuseTransformerPatterns(Graph& g, const BackendRegistry& backends, std::vector<std::string>* log) {
  Matcher m(g, backends);
  // Index loops: AddConstant may grow the value table, never the node list.
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.nodes()[i];
    if (!n.dead && n.op == OpKind::kTensorOp) FuseLayerNorm(m, n, log);
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.nodes()[i];
    if (!n.dead && n.op == OpKind::kTensorOp) FuseGelu(m, n, log);
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.nodes()[i];
    if (!n.dead && n.op == OpKind::kTensorOp) FuseMatMulBias(m, n, log);
  }
  return Status::Ok();
}

}  // namespace kiln
