// kiln's graph IR. Every activation is a matrix whose rows range over one of
// a few runtime-sized spaces (the batch's tokens, the rows whose logits are
// wanted, ...) and whose columns are fixed by the model; so a graph compiled
// for a token-count bucket has static shapes, while the actual counts and the
// attention metadata (block tables, positions) are runtime inputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "format/model_config.h"
#include "graph/attribute_map.h"
#include "graph/laid_out_weights.h"
#include "graph/op.h"
#include "graph/tensor_data.h"
#include "graph/tensor_type.h"

namespace kiln {

struct Weight;

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

// What the rows of a value range over.
enum class RowSpace : uint8_t {
  kTokens,        // one row per token in the batch
  kOutputRows,    // one row per token whose logits are wanted
  kContextRows,   // decomposed attention: all context tokens of all sequences
  kScoreRows,     // decomposed attention: sum over sequences of tokens x context
  kNone,          // zero-sized marker values (ordering edges)
  kFixed,         // an N-dimensional tensor of static shape (Value::dims): one "row" of all its elements
};

const char* RowSpaceName(RowSpace r);

// Row capacities of one compiled bucket.
struct ShapeEnv {
  int64_t tokens = 0;
  int64_t output_rows = 0;
  int64_t context_rows = 0;
  int64_t score_rows = 0;

  int64_t Rows(RowSpace r) const;
};

struct Value {
  std::string name;  // stable name for dumps and plans ("layers.3.attn_out")
  DType dtype = DType::kF32;
  RowSpace rows = RowSpace::kTokens;
  int64_t cols = 0;
  int32_t producer = -1;  // node index
  // A view of columns [col_offset, col_offset + cols) of another value's
  // storage (the parts of a fused projection's output).
  ValueId view_of = kNoValue;
  int64_t col_offset = 0;
  bool is_output = false;  // written to caller memory, not the arena
  int32_t domain = 0;      // memory domain, assigned by the layout stage

  // N-dimensional tensors (rows == kFixed): the shape, cols being its
  // element count; how the layout stage lays its axes out in memory.
  std::vector<int64_t> dims;
  TensorLayout layout = TensorLayout::kRowMajor;
  // A tensor known at compile time (a weight, a folded value): no node
  // produces it and it lives in its own memory, not the arena.
  std::shared_ptr<const TensorData> constant;
  // A graph input (read from) or output (written to) caller memory: the
  // index into RunState::tensor_io; -1 otherwise.
  int32_t io_slot = -1;
  bool is_graph_input = false;

  bool is_marker() const { return rows == RowSpace::kNone; }
  bool is_tensor() const { return rows == RowSpace::kFixed; }
  // Bound before any node runs: a constant or a graph input.
  bool is_preset() const { return constant != nullptr || is_graph_input; }
  TensorType tensor_type() const { return TensorType{dtype, dims}; }
  // Bytes of one row of this value's own columns (a tensor: all of it, as
  // its layout lays it out).
  int64_t RowBytes() const;
};

// Attributes; each op reads the fields it needs.
struct NodeAttrs {
  double eps = 0;             // rms_norm
  int64_t group = 0;          // rms_norm: normalize groups of this many columns (0: whole row)
  int64_t layer = -1;         // kv_write, attention, gather_kv: which layer's cache
  int64_t n_heads = 0;        // rope, attention
  int64_t n_kv_heads = 0;     // attention
  int64_t head_dim = 0;       // rope, attention
  int64_t sliding_window = 0; // attention: 0 for full causal attention
  double scale = 0;           // attention: score scale; embedding: row scale (0: none)
  double softcap = 0;         // attention, softcap: y = softcap * tanh(x / softcap) (0: none)
  RopeStyle rope_style = RopeStyle::kHalf;
  bool gelu_tanh = false;     // gelu
  DType cast_to = DType::kF32;
  int32_t transfer_from = 0;  // transfer: source domain
  // moe: experts each row runs, and whether their softmax probabilities
  // are renormalized to sum to 1.
  int64_t experts_per_token = 0;
  bool normalize_expert_weights = false;
};

struct Node {
  OpKind op = OpKind::kAdd;
  std::string name;  // where it came from ("layers.3.self_attn.q_proj")
  // kTensorOp: the op's name in graph/tensor_op.h's table ("Conv"); its
  // attributes are in named_attrs. An omitted optional input is kNoValue.
  std::string op_type;
  int32_t opset = 0;  // kTensorOp: the default-domain opset of its model (semantics change across versions)
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  // Weights in op order: linear (W0, W1, ..., then biases or nullptr per W),
  // rms_norm (w), embedding (table), moe (MoeWeights's order).
  std::vector<const Weight*> weights;
  NodeAttrs attrs;
  // What the fields of attrs do not cover, by name (RoPE's "rope.*").
  AttributeMap named_attrs;
  std::string backend;                  // placement, set by legalize
  std::vector<std::string> fused_from;  // names of the nodes a fusion replaced
  bool dead = false;                    // removed by a rewrite; dropped by Compact()
};

// The weights of a moe node, in order: the router [experts, hidden]; gate,
// up and down of each expert; the shared expert's gate, up and down and its
// gate [1, hidden] (null when the model has none).
namespace moe_weights {
inline constexpr size_t kRouter = 0;
inline constexpr int kGate = 0, kUp = 1, kDown = 2, kSharedGate = 3;
inline int64_t ExpertCount(const Node& n) {
  return n.weights.size() >= 5 ? static_cast<int64_t>((n.weights.size() - 5) / 3) : 0;
}
inline size_t Expert(int64_t e, int part) { return 1 + 3 * static_cast<size_t>(e) + static_cast<size_t>(part); }
inline size_t Shared(const Node& n, int part) { return n.weights.size() - 4 + static_cast<size_t>(part); }
}  // namespace moe_weights

class Graph {
 public:
  ValueId AddValue(std::string name, DType dtype, RowSpace rows, int64_t cols);
  // An N-dimensional tensor value of static type.
  ValueId AddTensorValue(std::string name, const TensorType& type);
  // A compile-time constant tensor value.
  ValueId AddConstant(std::string name, TensorData data);
  // Appends a node; sets the producer of its outputs. Returns its index.
  int32_t AddNode(Node node);

  Value& value(ValueId id) { return values_[static_cast<size_t>(id)]; }
  const Value& value(ValueId id) const { return values_[static_cast<size_t>(id)]; }
  std::vector<Value>& values() { return values_; }
  const std::vector<Value>& values() const { return values_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }

  // The value whose storage `id` lives in (itself unless it is a view).
  ValueId StorageOf(ValueId id) const;
  // Elements between consecutive rows of `id` (its storage's cols).
  int64_t RowStride(ValueId id) const;

  // For each value, the indices of the nodes that read it, in order.
  std::vector<std::vector<int32_t>> Consumers() const;

  // Drops dead nodes, renumbers producers, and checks that every input is
  // produced before it is read.
  Status Compact();

  // Checks structural invariants: ids in range, single producer, order.
  Status Validate() const;

  // Where the kernels bound for this graph find constants already in their
  // layouts and record those they lay out (an artifact's; null: neither).
  std::shared_ptr<LaidOutWeights> laid_out;

  // One line per node: "%12 = linear[cpu](%11) layers.0.self_attn.q_proj ...".
  std::string ToString() const;

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
};

// Floating-point operations and bytes touched by one node at `env`'s sizes;
// the legalize stage uses them to price fallbacks.
struct NodeCost {
  double flops = 0;
  double weight_bytes = 0;
  double activation_bytes = 0;
};
NodeCost EstimateCost(const Graph& g, const Node& node, const ShapeEnv& env);

}  // namespace kiln
