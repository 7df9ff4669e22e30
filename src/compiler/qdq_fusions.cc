// QDQ convolutions and matrix products on integer kernels (see qdq_fusions.h).
#include "compiler/qdq_fusions.h"

#include <cmath>
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
  if (n.dead || n.op != OpKind::kTensorOp || n.op_type != "DequantizeLinear" || n.inputs.size() < 2)
    return nullptr;
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
  if (q == nullptr || q->type().dtype != DType::kI32 || q->type().ElementCount() != channels)
    return std::nullopt;
  auto scales = ChannelScales(g, *dq, 1, 0, channels);
  if (!scales) return std::nullopt;
  const TensorData* zp = ConstantOf(g, ZeroPointOf(*dq));
  if (zp != nullptr && zp->type().dtype != DType::kI32) return std::nullopt;
  for (int64_t o = 0; o < channels; ++o) {
    const int32_t z = zp == nullptr ? 0 : zp->As<int32_t>()[zp->type().ElementCount() == 1 ? 0 : o];
    // As DequantizeLinear computes it: (q - zp) exact, then one rounding.
    out[static_cast<size_t>(o)] =
        static_cast<float>(q->As<int32_t>()[o] - z) * (*scales)[static_cast<size_t>(o)];
  }
  return out;
}

// The conv's bias as int32 per output channel when it is
// DequantizeLinear(int32 constant) with zero points 0: the form a quantizer
// writes with bias scale sx * sw, added to the int32 sums as it is. A bias
// scale other than sx * sw[oc] (beyond rounding) leaves it to the f32 form.
const TensorData* IntegerBias(const Graph& g, const Node& conv, int64_t channels, float sx,
                              const std::vector<float>& sw) {
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
  auto scales = ChannelScales(g, *dq, 1, 0, channels);
  if (!scales) return nullptr;
  for (int64_t o = 0; o < channels; ++o) {
    const double want = static_cast<double>(sx) * sw[static_cast<size_t>(o)];
    if (std::fabs((*scales)[static_cast<size_t>(o)] - want) > 1e-6 * std::fabs(want)) return nullptr;
  }
  return q;
}

// The QuantizeLinear that alone reads `y`, with a constant scalar f32 scale
// and a constant scalar (or absent) zero point; else null.
Node* RequantizeOf(Graph& g, const std::vector<std::vector<int32_t>>& consumers, ValueId y) {
  if (g.value(y).is_output || consumers[static_cast<size_t>(y)].size() != 1) return nullptr;
  Node& q = g.nodes()[static_cast<size_t>(consumers[static_cast<size_t>(y)][0])];
  if (q.dead || q.op != OpKind::kTensorOp || q.op_type != "QuantizeLinear" || q.inputs[0] != y)
    return nullptr;
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

// A convolution or matrix product over DequantizeLinear'd int8 inputs,
// matched: the integer op that computes its sums and the dequantization
// parameters per output channel.
struct IntegerProduct {
  Node op;                           // ConvInteger or MatMulInteger; its output is set later
  int64_t channels = 0;              // output channels (conv axis 1, matrix columns)
  std::vector<int64_t> per_channel;  // the broadcast shape of per-channel constants
  float sx = 0;
  std::vector<float> sw;
  std::vector<std::string> fused_from;
};

// The activation's DequantizeLinear: a non-constant int8 tensor, one constant
// scale, a constant scalar zero point.
const Node* ActivationDequantize(const Graph& g, ValueId v, float* sx) {
  const Node* dq = DequantizeOf(g, v);
  if (dq == nullptr) return nullptr;
  const ValueId xq = dq->inputs[0];
  if (ConstantOf(g, xq) != nullptr || !IsInt8(g.value(xq).dtype) || !ZeroPointConstant(g, *dq))
    return nullptr;
  if (const TensorData* zx = ConstantOf(g, ZeroPointOf(*dq));
      zx != nullptr && zx->type().ElementCount() != 1) {
    return nullptr;
  }
  auto s = ChannelScales(g, *dq, static_cast<int64_t>(g.value(xq).dims.size()), -1, 1);
  if (!s) return nullptr;
  *sx = (*s)[0];
  return dq;
}

// The weights' DequantizeLinear: a constant int8 tensor whose scale (and zero
// point) is per tensor or per channel along `axis`.
const Node* WeightDequantize(const Graph& g, ValueId v, int64_t axis, int64_t channels,
                             std::vector<float>* sw) {
  const Node* dq = DequantizeOf(g, v);
  if (dq == nullptr || !ZeroPointConstant(g, *dq)) return nullptr;
  const TensorData* w = ConstantOf(g, dq->inputs[0]);
  if (w == nullptr || !IsInt8(w->type().dtype)) return nullptr;
  auto s = ChannelScales(g, *dq, static_cast<int64_t>(w->type().dims.size()), axis, channels);
  if (!s) return nullptr;
  if (const TensorData* zw = ConstantOf(g, ZeroPointOf(*dq))) {
    const int64_t n = zw->type().ElementCount();
    if (n != 1 && (n != channels || ConstantOf(g, dq->inputs[1])->type().ElementCount() != channels))
      return nullptr;
  }
  *sw = std::move(*s);
  return dq;
}

std::optional<IntegerProduct> MatchConv(const Graph& g, const Node& conv) {
  if (conv.inputs.size() < 2) return std::nullopt;
  const std::vector<int64_t>& y = g.value(conv.outputs[0]).dims;
  if (y.size() < 3) return std::nullopt;
  IntegerProduct p;
  p.channels = y[1];
  const Node* xdq = ActivationDequantize(g, conv.inputs[0], &p.sx);
  const Node* wdq = WeightDequantize(g, conv.inputs[1], 0, p.channels, &p.sw);
  if (xdq == nullptr || wdq == nullptr) return std::nullopt;
  const TensorType& w = ConstantOf(g, wdq->inputs[0])->type();
  if (w.dims.size() != y.size() || w.dims[0] != p.channels) return std::nullopt;
  p.per_channel.assign(y.size(), 1);
  p.per_channel[1] = p.channels;
  p.op = TensorNode(conv, "ConvInteger", conv.name,
                    {xdq->inputs[0], wdq->inputs[0], ZeroPointOf(*xdq), ZeroPointOf(*wdq)}, kNoValue);
  p.op.named_attrs = conv.named_attrs;
  p.fused_from = {xdq->name, wdq->name, conv.name};
  return p;
}

// MatMul(x, W) and Gemm(x, W[, C]) with alpha = beta = 1, x not transposed;
// W [K, N] (or [N, K] under transB, transposed here).
std::optional<IntegerProduct> MatchMatMul(Graph& g, const Node& mm) {
  const bool gemm = mm.op_type == "Gemm";
  if (mm.inputs.size() < 2) return std::nullopt;
  for (const char* one : {"alpha", "beta"}) {
    if (mm.named_attrs.Has(one) && *mm.named_attrs.Float(one) != 1.0) return std::nullopt;
  }
  if (mm.named_attrs.Has("transA") && *mm.named_attrs.Int("transA") != 0) return std::nullopt;
  const bool trans_b = mm.named_attrs.Has("transB") && *mm.named_attrs.Int("transB") != 0;
  const std::vector<int64_t>& y = g.value(mm.outputs[0]).dims;
  if (y.empty()) return std::nullopt;
  IntegerProduct p;
  p.channels = y.back();
  const Node* xdq = ActivationDequantize(g, mm.inputs[0], &p.sx);
  const Node* wdq = WeightDequantize(g, mm.inputs[1], trans_b ? 0 : 1, p.channels, &p.sw);
  if (xdq == nullptr || wdq == nullptr) return std::nullopt;
  const TensorData& w = *ConstantOf(g, wdq->inputs[0]);
  if (w.type().dims.size() != 2 || w.type().dims[trans_b ? 0 : 1] != p.channels) return std::nullopt;
  if (gemm && g.value(mm.inputs[0]).dims.size() != 2) return std::nullopt;
  ValueId wq = wdq->inputs[0];
  if (trans_b) {
    const int64_t n = w.type().dims[0], k = w.type().dims[1];
    std::vector<uint8_t> t(static_cast<size_t>(n * k));  // int8 or uint8: one byte each
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j)
        t[static_cast<size_t>(j * n + i)] = w.data()[static_cast<size_t>(i * k + j)];
    }
    wq = g.AddConstant(mm.name + ".weights_kn", TensorData::FromValues(w.type().dtype, {k, n}, t));
  }
  p.per_channel = {p.channels};
  p.op = TensorNode(mm, "MatMulInteger", mm.name, {xdq->inputs[0], wq, ZeroPointOf(*xdq), ZeroPointOf(*wdq)},
                    kNoValue);
  p.fused_from = {xdq->name, wdq->name, mm.name};
  return p;
}

// The nodes that replace `node` (a Conv, MatMul or Gemm), or nothing when it
// is not a QDQ product.
std::vector<Node> RewriteProduct(Graph& g, const std::vector<std::vector<int32_t>>& consumers,
                                 const Node& node, bool* requantized) {
  *requantized = false;
  if (node.outputs.size() != 1 || g.value(node.outputs[0]).dtype != DType::kF32) return {};
  std::optional<IntegerProduct> matched = node.op_type == "Conv" ? MatchConv(g, node) : MatchMatMul(g, node);
  if (!matched) return {};
  IntegerProduct& p = *matched;
  const int64_t channels = p.channels;
  const Value y = g.value(node.outputs[0]);  // a copy: adding values reallocates them
  const std::vector<int64_t>& per_channel = p.per_channel;
  while (!p.op.inputs.empty() && p.op.inputs.back() == kNoValue) p.op.inputs.pop_back();
  const ValueId bias_input = node.op_type != "MatMul" && node.inputs.size() >= 3 ? node.inputs[2] : kNoValue;
  Node* requant = RequantizeOf(g, consumers, node.outputs[0]);
  const TensorData* int_bias = bias_input == kNoValue ? nullptr : IntegerBias(g, node, channels, p.sx, p.sw);
  bool has_bias = false;
  std::optional<std::vector<float>> bias;
  if (requant == nullptr || (bias_input != kNoValue && int_bias == nullptr)) {
    requant = nullptr;
    bias = node.op_type == "MatMul" ? std::vector<float>(static_cast<size_t>(channels), 0.0f)
                                    : BiasOf(g, node, channels, &has_bias);
    if (!bias) return {};
  }
  std::vector<Node> out;
  ValueId acc = g.AddTensorValue(node.name + ".acc_i32", TensorType{DType::kI32, y.dims});
  p.op.outputs = {acc};
  if (requant != nullptr) p.fused_from.push_back(requant->name);
  p.op.fused_from = p.fused_from;
  out.push_back(std::move(p.op));
  if (requant != nullptr) {
    // Followed by QuantizeLinear (and the bias integer or absent): requantize
    // as QLinearConv does, y_q = round(float(sums + bias) * (sx * sw / sy)) + zy.
    const float sy = ConstantOf(g, requant->inputs[1])->As<float>()[0];
    std::vector<float> multiplier(static_cast<size_t>(channels));
    for (int64_t o = 0; o < channels; ++o)
      multiplier[static_cast<size_t>(o)] = p.sx * p.sw[static_cast<size_t>(o)] / sy;
    if (int_bias != nullptr) {
      std::vector<int32_t> b(int_bias->As<int32_t>(), int_bias->As<int32_t>() + channels);
      const ValueId bc =
          g.AddConstant(node.name + ".qdq_bias_i32", TensorData::FromValues(DType::kI32, per_channel, b));
      const ValueId biased = g.AddTensorValue(node.name + ".acc_bias_i32", TensorType{DType::kI32, y.dims});
      out.push_back(TensorNode(node, "Add", node.name + ".bias", {acc, bc}, biased));
      acc = biased;
    }
    const ValueId accf = g.AddTensorValue(node.name + ".acc_f32", TensorType{DType::kF32, y.dims});
    Node cast = TensorNode(node, "Cast", node.name + ".to_f32", {acc}, accf);
    cast.named_attrs.SetInt("to", 1);  // ONNX FLOAT
    out.push_back(std::move(cast));
    const ValueId m = g.AddConstant(node.name + ".qdq_multiplier",
                                    TensorData::FromValues(DType::kF32, per_channel, multiplier));
    const ValueId steps = g.AddTensorValue(node.name + ".quant_steps", TensorType{DType::kF32, y.dims});
    out.push_back(TensorNode(node, "Mul", node.name + ".requantize", {accf, m}, steps));
    // The QuantizeLinear now only rounds, adds its zero point and saturates.
    requant->inputs[0] = steps;
    requant->inputs[1] = g.AddConstant(node.name + ".unit_scale",
                                       TensorData::FromValues(DType::kF32, {}, std::vector<float>{1.0f}));
    *requantized = true;
    return out;
  }
  // An f32 output: y = float(sums) * (sx * sw) + b.
  std::vector<float> scale(static_cast<size_t>(channels));
  for (int64_t o = 0; o < channels; ++o) scale[static_cast<size_t>(o)] = p.sx * p.sw[static_cast<size_t>(o)];
  const ValueId accf = g.AddTensorValue(node.name + ".acc_f32", TensorType{DType::kF32, y.dims});
  Node cast = TensorNode(node, "Cast", node.name + ".to_f32", {acc}, accf);
  cast.named_attrs.SetInt("to", 1);  // ONNX FLOAT
  out.push_back(std::move(cast));
  const ValueId s =
      g.AddConstant(node.name + ".qdq_scale", TensorData::FromValues(DType::kF32, per_channel, scale));
  const ValueId scaled =
      has_bias ? g.AddTensorValue(node.name + ".scaled", TensorType{DType::kF32, y.dims}) : node.outputs[0];
  out.push_back(TensorNode(node, "Mul", node.name + ".scale", {accf, s}, scaled));
  if (has_bias) {
    const ValueId b =
        g.AddConstant(node.name + ".qdq_bias", TensorData::FromValues(DType::kF32, per_channel, *bias));
    out.push_back(TensorNode(node, "Add", node.name + ".bias", {scaled, b}, node.outputs[0]));
  }
  return out;
}

}  // namespace

Status FuseQdqProducts(Graph& g, std::vector<std::string>* log) {
  std::map<size_t, std::vector<Node>> replaced;
  const auto consumers = g.Consumers();
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.dead || n.op != OpKind::kTensorOp) continue;
    if (n.op_type != "Conv" && n.op_type != "MatMul" && n.op_type != "Gemm") continue;
    bool requantized = false;
    std::vector<Node> with = RewriteProduct(g, consumers, n, &requantized);
    if (with.empty()) continue;
    log->push_back(fmt::format("{} {}: DequantizeLinear inputs{} fused, runs as {} (exact int32 sums) {}",
                               n.op_type, n.name, requantized ? " and QuantizeLinear output" : "",
                               with[0].op_type, requantized ? "requantized" : "scaled to f32"));
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
