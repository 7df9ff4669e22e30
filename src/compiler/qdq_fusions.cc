// QDQ convolutions on integer kernels (see qdq_fusions.h).
#include "compiler/qdq_fusions.h"

#include <cstdint>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace kiln {
namespace {

bool IsInt8(DType t) {
  return t == DType::kU8 || t == DType::kI8;
}

const TensorData* ConstantOf(const Graph& g, ValueId v) {
  return v == kNoValue ? nullptr : g.value(v).constant.get();
}

// The DequantizeLinear node writing `v`, or null.
const Node* DequantizeOf(const Graph& g, ValueId v) {
  if (v == kNoValue || g.value(v).producer < 0) return nullptr;
  const Node& n = g.nodes()[static_cast<size_t>(g.value(v).producer)];
  if (n.dead || n.op != OpKind::kTensorOp || n.op_type != "DequantizeLinear" || n.inputs.size() < 2) return nullptr;
  if (n.named_attrs.Has("block_size")) {
    auto b = n.named_attrs.Int("block_size");
    if (!b.ok() || *b != 0) return nullptr;
  }
  return &n;
}

// The per-channel values of a DequantizeLinear's f32 scale, `channels` long
// (a per-tensor scale repeated), when it is a constant that scales along
// `axis` of a rank-`rank` input or is one value.
std::optional<std::vector<float>> ChannelScales(const Graph& g, const Node& dq, int64_t rank, int64_t axis,
                                                int64_t channels) {
  const TensorData* s = ConstantOf(g, dq.inputs[1]);
  if (s == nullptr || s->type().dtype != DType::kF32) return std::nullopt;
  const int64_t n = s->type().ElementCount();
  std::vector<float> out(static_cast<size_t>(channels));
  if (n == 1) {
    std::fill(out.begin(), out.end(), s->As<float>()[0]);
    return out;
  }
  int64_t a = 1;
  if (dq.named_attrs.Has("axis")) {
    auto v = dq.named_attrs.Int("axis");
    if (!v.ok()) return std::nullopt;
    a = *v < 0 ? *v + rank : *v;
  }
  if (a != axis || n != channels) return std::nullopt;
  for (int64_t c = 0; c < channels; ++c) out[static_cast<size_t>(c)] = s->As<float>()[c];
  return out;
}

// A zero point input is absent or a constant.
bool ZeroPointConstant(const Graph& g, const Node& dq) {
  return dq.inputs.size() < 3 || dq.inputs[2] == kNoValue || ConstantOf(g, dq.inputs[2]) != nullptr;
}

ValueId ZeroPointOf(const Node& dq) {
  return dq.inputs.size() < 3 ? kNoValue : dq.inputs[2];
}

// The conv's bias as f32 per output channel: none (zeros), an f32 constant,
// or DequantizeLinear of an int32 constant with constant parameters.
std::optional<std::vector<float>> BiasOf(const Graph& g, const Node& conv, int64_t channels, bool* has_bias) {
  *has_bias = conv.inputs.size() >= 3 && conv.inputs[2] != kNoValue;
  std::vector<float> out(static_cast<size_t>(channels), 0.0f);
  if (!*has_bias) return out;
  const ValueId b = conv.inputs[2];
  if (const TensorData* c = ConstantOf(g, b)) {
    if (c->type().dtype != DType::kF32 || c->type().ElementCount() != channels) return std::nullopt;
    for (int64_t o = 0; o < channels; ++o) out[static_cast<size_t>(o)] = c->As<float>()[o];
    return out;
  }
  const Node* dq = DequantizeOf(g, b);
  if (dq == nullptr || !ZeroPointConstant(g, *dq)) return std::nullopt;
  const TensorData* q = ConstantOf(g, dq->inputs[0]);
  if (q == nullptr || q->type().dtype != DType::kI32 || q->type().ElementCount() != channels) return std::nullopt;
  auto scales = ChannelScales(g, *dq, 1, 0, channels);
  if (!scales) return std::nullopt;
  const TensorData* zp = ConstantOf(g, ZeroPointOf(*dq));
  if (zp != nullptr && zp->type().dtype != DType::kI32) return std::nullopt;
  for (int64_t o = 0; o < channels; ++o) {
    const int32_t z = zp == nullptr ? 0 : zp->As<int32_t>()[zp->type().ElementCount() == 1 ? 0 : o];
    // As DequantizeLinear computes it: (q - zp) exact, then one rounding.
    out[static_cast<size_t>(o)] = static_cast<float>(q->As<int32_t>()[o] - z) * (*scales)[static_cast<size_t>(o)];
  }
  return out;
}

// The conv's bias as int32 per output channel when it is
// DequantizeLinear(int32 constant) with zero points 0: the form a quantizer
// writes with bias scale sx * sw, added to the int32 sums as it is.
const TensorData* IntegerBias(const Graph& g, const Node& conv, int64_t channels) {
  if (conv.inputs.size() < 3 || conv.inputs[2] == kNoValue) return nullptr;
  const Node* dq = DequantizeOf(g, conv.inputs[2]);
  if (dq == nullptr || !ZeroPointConstant(g, *dq)) return nullptr;
  const TensorData* q = ConstantOf(g, dq->inputs[0]);
  if (q == nullptr || q->type().dtype != DType::kI32 || q->type().ElementCount() != channels) return nullptr;
  if (const TensorData* zp = ConstantOf(g, ZeroPointOf(*dq))) {
    for (int64_t i = 0; i < zp->type().ElementCount(); ++i) {
      if (zp->As<int32_t>()[i] != 0) return nullptr;
    }
  }
  return q;
}

// The QuantizeLinear that alone reads `y`, with a constant scalar f32 scale
// and a constant scalar (or absent) zero point; else null.
Node* RequantizeOf(Graph& g, const std::vector<std::vector<int32_t>>& consumers, ValueId y) {
  if (g.value(y).is_output || consumers[static_cast<size_t>(y)].size() != 1) return nullptr;
  Node& q = g.nodes()[static_cast<size_t>(consumers[static_cast<size_t>(y)][0])];
  if (q.dead || q.op != OpKind::kTensorOp || q.op_type != "QuantizeLinear" || q.inputs[0] != y) return nullptr;
  const TensorData* s = ConstantOf(g, q.inputs[1]);
  if (s == nullptr || s->type().dtype != DType::kF32 || s->type().ElementCount() != 1) return nullptr;
  if (q.inputs.size() >= 3 && q.inputs[2] != kNoValue) {
    const TensorData* z = ConstantOf(g, q.inputs[2]);
    if (z == nullptr || z->type().ElementCount() != 1) return nullptr;
  }
  return &q;
}

Node TensorNode(const Node& like, std::string op_type, std::string name, std::vector<ValueId> inputs,
                ValueId output) {
  Node n;
  n.op = OpKind::kTensorOp;
  n.op_type = std::move(op_type);
  n.name = std::move(name);
  n.opset = like.opset;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  return n;
}

// The nodes that replace `conv`, or nothing when it is not a QDQ convolution.
std::vector<Node> RewriteConv(Graph& g, const std::vector<std::vector<int32_t>>& consumers, const Node& conv,
                              bool* requantized) {
  *requantized = false;
  if (conv.inputs.size() < 2 || conv.outputs.size() != 1) return {};
  const Node* xdq = DequantizeOf(g, conv.inputs[0]);
  const Node* wdq = DequantizeOf(g, conv.inputs[1]);
  if (xdq == nullptr || wdq == nullptr) return {};
  const ValueId xq = xdq->inputs[0], wq = wdq->inputs[0];
  const TensorData* w = ConstantOf(g, wq);
  if (w == nullptr || !IsInt8(w->type().dtype) || ConstantOf(g, xq) != nullptr || !IsInt8(g.value(xq).dtype)) {
    return {};
  }
  const Value y = g.value(conv.outputs[0]);  // a copy: adding values reallocates them
  if (y.dtype != DType::kF32 || y.dims.size() < 3 || w->type().dims.size() != y.dims.size()) return {};
  const int64_t channels = y.dims[1];
  if (w->type().dims[0] != channels) return {};
  // The activation's parameters: one scale, a constant zero point.
  auto sx = ChannelScales(g, *xdq, static_cast<int64_t>(g.value(xq).dims.size()), -1, 1);
  if (!sx || !ZeroPointConstant(g, *xdq) || !ZeroPointConstant(g, *wdq)) return {};
  if (const TensorData* zx = ConstantOf(g, ZeroPointOf(*xdq)); zx != nullptr && zx->type().ElementCount() != 1) {
    return {};
  }
  auto sw = ChannelScales(g, *wdq, static_cast<int64_t>(w->type().dims.size()), 0, channels);
  if (!sw) return {};
  if (const TensorData* zw = ConstantOf(g, ZeroPointOf(*wdq))) {
    const int64_t n = zw->type().ElementCount();
    if (n != 1) {
      // Per-channel zero points must run along axis 0 as the scales do.
      if (n != channels || ConstantOf(g, wdq->inputs[1])->type().ElementCount() != channels) return {};
    }
  }
  // Followed by QuantizeLinear (and the bias integer or absent): requantize
  // as a QLinearConv does, y_q = round(float(sums + bias) * (sx * sw / sy)) + zy.
  Node* requant = RequantizeOf(g, consumers, conv.outputs[0]);
  const TensorData* int_bias = IntegerBias(g, conv, channels);
  const bool has_any_bias = conv.inputs.size() >= 3 && conv.inputs[2] != kNoValue;
  if (requant != nullptr && (!has_any_bias || int_bias != nullptr)) {
    const float sy = ConstantOf(g, requant->inputs[1])->As<float>()[0];
    std::vector<float> multiplier(static_cast<size_t>(channels));
    for (int64_t o = 0; o < channels; ++o) {
      multiplier[static_cast<size_t>(o)] = (*sx)[0] * (*sw)[static_cast<size_t>(o)] / sy;
    }
    std::vector<int64_t> per_channel(y.dims.size(), 1);
    per_channel[1] = channels;
    std::vector<Node> out;
    ValueId acc = g.AddTensorValue(conv.name + ".acc_i32", TensorType{DType::kI32, y.dims});
    Node ci = TensorNode(conv, "ConvInteger", conv.name, {xq, wq, ZeroPointOf(*xdq), ZeroPointOf(*wdq)}, acc);
    while (!ci.inputs.empty() && ci.inputs.back() == kNoValue) ci.inputs.pop_back();
    ci.named_attrs = conv.named_attrs;
    ci.fused_from = {xdq->name, wdq->name, conv.name, requant->name};
    out.push_back(std::move(ci));
    if (int_bias != nullptr) {
      std::vector<int32_t> b(int_bias->As<int32_t>(), int_bias->As<int32_t>() + channels);
      const ValueId bc = g.AddConstant(conv.name + ".qdq_bias_i32", TensorData::FromValues(DType::kI32, per_channel, b));
      const ValueId biased = g.AddTensorValue(conv.name + ".acc_bias_i32", TensorType{DType::kI32, y.dims});
      out.push_back(TensorNode(conv, "Add", conv.name + ".bias", {acc, bc}, biased));
      acc = biased;
    }
    const ValueId accf = g.AddTensorValue(conv.name + ".acc_f32", TensorType{DType::kF32, y.dims});
    Node cast = TensorNode(conv, "Cast", conv.name + ".to_f32", {acc}, accf);
    cast.named_attrs.SetInt("to", 1);  // ONNX FLOAT
    out.push_back(std::move(cast));
    const ValueId m =
        g.AddConstant(conv.name + ".qdq_multiplier", TensorData::FromValues(DType::kF32, per_channel, multiplier));
    const ValueId steps = g.AddTensorValue(conv.name + ".quant_steps", TensorType{DType::kF32, y.dims});
    out.push_back(TensorNode(conv, "Mul", conv.name + ".requantize", {accf, m}, steps));
    // The QuantizeLinear now only rounds, adds its zero point and saturates.
    requant->inputs[0] = steps;
    requant->inputs[1] = g.AddConstant(conv.name + ".unit_scale", TensorData::FromValues(DType::kF32, {}, std::vector<float>{1.0f}));
    *requantized = true;
    return out;
  }
  bool has_bias = false;
  auto bias = BiasOf(g, conv, channels, &has_bias);
  if (!bias) return {};

  std::vector<float> scale(static_cast<size_t>(channels));
  for (int64_t o = 0; o < channels; ++o) scale[static_cast<size_t>(o)] = (*sx)[0] * (*sw)[static_cast<size_t>(o)];
  std::vector<int64_t> per_channel(y.dims.size(), 1);
  per_channel[1] = channels;

  std::vector<Node> out;
  const ValueId acc = g.AddTensorValue(conv.name + ".acc_i32", TensorType{DType::kI32, y.dims});
  Node ci = TensorNode(conv, "ConvInteger", conv.name, {xq, wq, ZeroPointOf(*xdq), ZeroPointOf(*wdq)}, acc);
  while (!ci.inputs.empty() && ci.inputs.back() == kNoValue) ci.inputs.pop_back();
  ci.named_attrs = conv.named_attrs;
  ci.fused_from = {xdq->name, wdq->name, conv.name};
  out.push_back(std::move(ci));
  const ValueId accf = g.AddTensorValue(conv.name + ".acc_f32", TensorType{DType::kF32, y.dims});
  Node cast = TensorNode(conv, "Cast", conv.name + ".to_f32", {acc}, accf);
  cast.named_attrs.SetInt("to", 1);  // ONNX FLOAT
  out.push_back(std::move(cast));
  const ValueId s = g.AddConstant(conv.name + ".qdq_scale", TensorData::FromValues(DType::kF32, per_channel, scale));
  const ValueId scaled =
      has_bias ? g.AddTensorValue(conv.name + ".scaled", TensorType{DType::kF32, y.dims}) : conv.outputs[0];
  out.push_back(TensorNode(conv, "Mul", conv.name + ".scale", {accf, s}, scaled));
  if (has_bias) {
    const ValueId b = g.AddConstant(conv.name + ".qdq_bias", TensorData::FromValues(DType::kF32, per_channel, *bias));
    out.push_back(TensorNode(conv, "Add", conv.name + ".bias", {scaled, b}, conv.outputs[0]));
  }
  return out;
}

}  // namespace

Status FuseQdqConvolutions(Graph& g, std::vector<std::string>* log) {
  std::map<size_t, std::vector<Node>> replaced;
  const auto consumers = g.Consumers();
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.dead || n.op != OpKind::kTensorOp || n.op_type != "Conv") continue;
    bool requantized = false;
    std::vector<Node> with = RewriteConv(g, consumers, n, &requantized);
    if (with.empty()) continue;
    log->push_back(requantized ? fmt::format("Conv {}: DequantizeLinear inputs and QuantizeLinear output fused, "
                                             "runs as ConvInteger (exact int32 sums) requantized",
                                             n.name)
                               : fmt::format("Conv {}: DequantizeLinear inputs fused, runs as ConvInteger (exact "
                                             "int32 sums) scaled to f32",
                                             n.name));
    replaced[i] = std::move(with);
  }
  if (replaced.empty()) return Status::Ok();
  std::vector<Node> nodes;
  nodes.reserve(g.nodes().size() + 3 * replaced.size());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    auto it = replaced.find(i);
    if (it == replaced.end()) {
      nodes.push_back(std::move(g.nodes()[i]));
      continue;
    }
    for (Node& n : it->second) nodes.push_back(std::move(n));
  }
  g.nodes() = std::move(nodes);
  KILN_RETURN_IF_ERROR(g.Compact());
  // The DequantizeLinear nodes nothing reads any more.
  bool removed = true;
  while (removed) {
    removed = false;
    auto consumers = g.Consumers();
    for (Node& n : g.nodes()) {
      if (n.dead || n.op_type != "DequantizeLinear" || n.outputs.size() != 1) continue;
      const ValueId o = n.outputs[0];
      if (g.value(o).is_output || !consumers[static_cast<size_t>(o)].empty()) continue;
      n.dead = true;
      removed = true;
    }
  }
  return g.Compact();
}

}  // namespace kiln
