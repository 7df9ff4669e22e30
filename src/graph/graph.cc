// Graph construction, validation and printing.
#include "graph/graph.h"

#include <algorithm>

#include <fmt/format.h>

#include "format/weight_store.h"
#include "graph/tensor_op.h"

namespace kiln {

const char* RowSpaceName(RowSpace r) {
  switch (r) {
    case RowSpace::kTokens: return "T";
    case RowSpace::kOutputRows: return "R";
    case RowSpace::kContextRows: return "C";
    case RowSpace::kScoreRows: return "S";
    case RowSpace::kNone: return "-";
    case RowSpace::kFixed: return "N";
  }
  return "?";
}

int64_t ShapeEnv::Rows(RowSpace r) const {
  switch (r) {
    case RowSpace::kTokens: return tokens;
    case RowSpace::kOutputRows: return output_rows;
    case RowSpace::kContextRows: return context_rows;
    case RowSpace::kScoreRows: return score_rows;
    case RowSpace::kNone: return 0;
    case RowSpace::kFixed: return 1;
  }
  return 0;
}

int64_t Value::RowBytes() const {
  // A blocked tensor's padded channels take memory too.
  if (rows == RowSpace::kFixed && layout != TensorLayout::kRowMajor) {
    return static_cast<int64_t>(TensorBytesIn(tensor_type(), layout));
  }
  auto bytes = DTypeBytes(dtype, static_cast<uint64_t>(cols));
  return bytes ? static_cast<int64_t>(*bytes) : 0;
}

ValueId Graph::AddValue(std::string name, DType dtype, RowSpace rows, int64_t cols) {
  Value v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.rows = rows;
  v.cols = cols;
  values_.push_back(std::move(v));
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::AddTensorValue(std::string name, const TensorType& type) {
  ValueId id = AddValue(std::move(name), type.dtype, RowSpace::kFixed, type.ElementCount());
  values_.back().dims = type.dims;
  return id;
}

ValueId Graph::AddConstant(std::string name, TensorData data) {
  ValueId id = AddTensorValue(std::move(name), data.type());
  values_.back().constant = std::make_shared<const TensorData>(std::move(data));
  return id;
}

int32_t Graph::AddNode(Node node) {
  auto index = static_cast<int32_t>(nodes_.size());
  for (ValueId out : node.outputs) values_[static_cast<size_t>(out)].producer = index;
  nodes_.push_back(std::move(node));
  return index;
}

ValueId Graph::StorageOf(ValueId id) const {
  while (value(id).view_of != kNoValue) id = value(id).view_of;
  return id;
}

int64_t Graph::RowStride(ValueId id) const { return value(StorageOf(id)).cols; }

std::vector<std::vector<int32_t>> Graph::Consumers() const {
  std::vector<std::vector<int32_t>> consumers(values_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].dead) continue;
    for (ValueId in : nodes_[n].inputs) {
      if (in != kNoValue) consumers[static_cast<size_t>(in)].push_back(static_cast<int32_t>(n));
    }
  }
  return consumers;
}

Status Graph::Compact() {
  std::vector<Node> kept;
  kept.reserve(nodes_.size());
  for (Node& n : nodes_) {
    if (!n.dead) kept.push_back(std::move(n));
  }
  nodes_ = std::move(kept);
  for (Value& v : values_) v.producer = -1;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    for (ValueId out : nodes_[n].outputs) values_[static_cast<size_t>(out)].producer = static_cast<int32_t>(n);
  }
  // Views are produced where their storage is.
  for (Value& v : values_) {
    if (v.view_of != kNoValue && v.producer < 0) {
      ValueId s = StorageOf(static_cast<ValueId>(&v - values_.data()));
      v.producer = values_[static_cast<size_t>(s)].producer;
    }
  }
  return Validate();
}

Status Graph::Validate() const {
  std::vector<int32_t> producer(values_.size(), -1);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    if (node.dead) continue;
    for (ValueId in : node.inputs) {
      if (in == kNoValue && node.op == OpKind::kTensorOp) continue;  // an omitted optional input
      if (in < 0 || static_cast<size_t>(in) >= values_.size()) {
        return Internal("graph: node {} ({}) reads value {} out of range", n, node.name, in);
      }
      ValueId s = StorageOf(in);
      if (producer[static_cast<size_t>(s)] < 0 && !value(s).is_preset()) {
        return Internal("graph: node {} ({}) reads {} before it is produced", n, node.name, value(in).name);
      }
    }
    for (ValueId out : node.outputs) {
      if (out < 0 || static_cast<size_t>(out) >= values_.size()) {
        return Internal("graph: node {} ({}) writes value {} out of range", n, node.name, out);
      }
      if (producer[static_cast<size_t>(out)] >= 0) {
        return Internal("graph: value {} produced twice (nodes {} and {})", value(out).name,
                        producer[static_cast<size_t>(out)], n);
      }
      producer[static_cast<size_t>(out)] = static_cast<int32_t>(n);
      // A storage written in parts (a Concat's inputs placed in its output)
      // counts as produced once its first part is: its readers follow the
      // node that was the Concat, so after every part.
      const ValueId s = StorageOf(out);
      if (s != out && producer[static_cast<size_t>(s)] < 0) {
        producer[static_cast<size_t>(s)] = static_cast<int32_t>(n);
      }
    }
  }
  return Status::Ok();
}

std::string Graph::ToString() const {
  std::string s;
  auto value_str = [&](ValueId id) {
    const Value& v = value(id);
    if (v.is_tensor()) return fmt::format("%{}:{}[{}]", id, DTypeName(v.dtype), DimsToString(v.dims));
    return fmt::format("%{}:{}[{}x{}]", id, DTypeName(v.dtype), RowSpaceName(v.rows), v.cols);
  };
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    if (node.dead) continue;
    std::string outs, ins;
    for (ValueId o : node.outputs) outs += (outs.empty() ? "" : ", ") + value_str(o);
    for (ValueId i : node.inputs) {
      std::string in = i == kNoValue ? "_" : value(i).constant ? fmt::format("%{}:const", i) : fmt::format("%{}", i);
      ins += (ins.empty() ? "" : ", ") + in;
    }
    const std::string op = node.op == OpKind::kTensorOp ? node.op_type : OpName(node.op);
    s += fmt::format("{:4} {} = {}[{}]({}) {}\n", n, outs.empty() ? "()" : outs, op,
                     node.backend.empty() ? "?" : node.backend, ins, node.name);
  }
  return s;
}

NodeCost EstimateCost(const Graph& g, const Node& node, const ShapeEnv& env) {
  NodeCost c;
  // A mixture reads the experts its rows choose: at most rows x top-k of them.
  const int64_t experts = node.op == OpKind::kMoe ? moe_weights::ExpertCount(node) : 0;
  double expert_share = 1.0;
  if (experts > 0) {
    const double rows = node.inputs.empty() ? 0.0 : static_cast<double>(env.Rows(g.value(node.inputs[0]).rows));
    expert_share = std::min(1.0, rows * static_cast<double>(node.attrs.experts_per_token) /
                                     static_cast<double>(experts));
  }
  for (size_t i = 0; i < node.weights.size(); ++i) {
    const Weight* w = node.weights[i];
    if (w == nullptr) continue;
    const bool expert = experts > 0 && i >= 1 && i < moe_weights::Shared(node, 0);
    c.weight_bytes += static_cast<double>(w->nbytes) * (expert ? expert_share : 1.0);
  }
  for (ValueId in : node.inputs) {
    if (in == kNoValue) continue;
    const Value& v = g.value(in);
    if (v.constant) {
      c.weight_bytes += static_cast<double>(v.constant->bytes());
      continue;
    }
    c.activation_bytes += static_cast<double>(env.Rows(v.rows)) * static_cast<double>(v.RowBytes());
  }
  for (ValueId out : node.outputs) {
    const Value& v = g.value(out);
    c.activation_bytes += static_cast<double>(env.Rows(v.rows)) * static_cast<double>(v.RowBytes());
  }
  auto rows_of_input = [&](size_t i) {
    return i < node.inputs.size() ? static_cast<double>(env.Rows(g.value(node.inputs[i]).rows)) : 0.0;
  };
  switch (node.op) {
    case OpKind::kLinear:
    case OpKind::kGateUpSiluMul:
      for (const Weight* w : node.weights) {
        // Matrices only: a bias or norm vector has one dimension.
        if (w != nullptr && w->shape.size() == 2) {
          c.flops += 2.0 * rows_of_input(0) * static_cast<double>(w->shape[0]) * static_cast<double>(w->shape[1]);
        }
      }
      break;
    case OpKind::kMoe:
      // Router and shared expert on every row; top-k of the experts each.
      for (size_t i = 0; i < node.weights.size(); ++i) {
        const Weight* w = node.weights[i];
        if (w == nullptr || w->shape.size() != 2) continue;
        const bool expert = i >= 1 && i < moe_weights::Shared(node, 0);
        const double per_row = expert ? static_cast<double>(node.attrs.experts_per_token) /
                                            static_cast<double>(std::max<int64_t>(experts, 1))
                                      : 1.0;
        c.flops += 2.0 * rows_of_input(0) * per_row * static_cast<double>(w->shape[0]) *
                   static_cast<double>(w->shape[1]);
      }
      break;
    case OpKind::kAttention:
    case OpKind::kAttnScores:
    case OpKind::kAttnValues: {
      // Per query token and head: 2 * context * head_dim for scores and again
      // for values, at the context length of the cost shape.
      double ctx = static_cast<double>(std::max(env.context_rows, env.tokens));
      double per = 2.0 * ctx * static_cast<double>(node.attrs.head_dim) * static_cast<double>(node.attrs.n_heads);
      c.flops += rows_of_input(0) * per * (node.op == OpKind::kAttention ? 2.0 : 1.0);
      break;
    }
    case OpKind::kEmbedding:
    case OpKind::kGatherKv:
    case OpKind::kKvWrite:
    case OpKind::kSelectRows:
    case OpKind::kCast:
    case OpKind::kTransfer:
      break;  // data movement only
    case OpKind::kTensorOp: {
      std::vector<TensorType> types(node.inputs.size()), outputs;
      ShapeContext ctx;
      ctx.op_type = node.op_type;
      ctx.node = node.name;
      ctx.attrs = &node.named_attrs;
      if (node.opset > 0) ctx.opset = node.opset;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] == kNoValue) {
          ctx.inputs.push_back({});
          continue;
        }
        const Value& v = g.value(node.inputs[i]);
        types[i] = v.tensor_type();
        ctx.inputs.push_back({&types[i], v.constant.get()});
      }
      for (ValueId out : node.outputs) outputs.push_back(g.value(out).tensor_type());
      ctx.num_outputs = static_cast<int>(outputs.size());
      c.flops += TensorOpFlops(ctx, outputs);
      break;
    }
    default: {
      // Elementwise and row ops: a few flops per output element.
      for (ValueId out : node.outputs) {
        const Value& v = g.value(out);
        c.flops += 4.0 * static_cast<double>(env.Rows(v.rows)) * static_cast<double>(v.cols);
      }
    }
  }
  return c;
}

}  // namespace kiln
