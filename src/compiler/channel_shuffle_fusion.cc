// ShuffleNet's channel shuffle as one op (see channel_shuffle_fusion.h).
#include "compiler/channel_shuffle_fusion.h"

#include <fmt/format.h>

#include "backend/backend.h"

namespace kiln {
namespace {

constexpr const char* kChannelShuffle = "kiln.ChannelShuffle";

bool IsTensorOp(const Node& n, const char* op) {
  return !n.dead && n.op == OpKind::kTensorOp && n.op_type == op;
}

}  // namespace

Status FuseChannelShuffles(Graph& g, const BackendRegistry& backends, std::vector<std::string>* log) {
  const auto consumers = g.Consumers();
  // The producer of v when v is a computed, non-output value whose only reader it is.
  auto sole_producer = [&](ValueId v, const char* op) -> Node* {
    const Value& val = g.value(v);
    if (val.producer < 0 || val.is_output || val.io_slot >= 0 ||
        consumers[static_cast<size_t>(v)].size() != 1)
      return nullptr;
    Node* p = &g.nodes()[static_cast<size_t>(val.producer)];
    return IsTensorOp(*p, op) ? p : nullptr;
  };
  for (Node& last : g.nodes()) {
    if (!IsTensorOp(last, "Reshape") || last.inputs.empty() || last.outputs.size() != 1) continue;
    Backend* b = backends.Find(last.backend);
    if (b == nullptr || !b->support().SupportsTensorOp(kChannelShuffle)) continue;
    const std::vector<int64_t>& out = g.value(last.outputs[0]).dims;
    Node* transpose = sole_producer(last.inputs[0], "Transpose");
    if (out.size() != 4 || transpose == nullptr || transpose->backend != last.backend) continue;
    auto perm = transpose->named_attrs.Ints("perm");
    if (!perm.ok() || *perm != std::vector<int64_t>{0, 2, 1, 3, 4}) continue;
    Node* first = sole_producer(transpose->inputs[0], "Reshape");
    if (first == nullptr || first->backend != last.backend || first->inputs.empty()) continue;
    const ValueId x = first->inputs[0];
    const std::vector<int64_t>& split = g.value(first->outputs[0]).dims;  // [N, g, C/g, H, W]
    if (g.value(x).dims != out || split.size() != 5 || split[0] != out[0] || split[1] * split[2] != out[1] ||
        split[3] != out[2] || split[4] != out[3])
      continue;
    std::vector<Node*> fused = {first, transpose};
    std::vector<ValueId> parts = {x};
    if (Node* concat = sole_producer(x, "Concat"); concat != nullptr && concat->backend == last.backend) {
      auto axis = concat->named_attrs.Int("axis");
      if (axis.ok() && (*axis == 1 || *axis == -3)) {
        parts = concat->inputs;
        fused.insert(fused.begin(), concat);
      }
    }
    std::vector<std::string> names;
    for (Node* n : fused) {
      names.push_back(n->name);
      last.fused_from.push_back(n->name);
      n->dead = true;
    }
    names.push_back(last.name);
    last.op_type = kChannelShuffle;
    last.inputs = std::move(parts);
    last.named_attrs = AttributeMap{};
    last.named_attrs.SetInt("groups", split[1]);
    log->push_back(fmt::format("channel shuffle ({} groups): {}", split[1], fmt::join(names, " + ")));
  }
  return Status::Ok();
}

}  // namespace kiln
