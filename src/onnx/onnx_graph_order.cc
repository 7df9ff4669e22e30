#include "onnx/onnx_graph_order.h"

#include <fmt/format.h>

#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace kiln {
namespace {

constexpr int kGraphInput = -1;
constexpr int kInitializer = -2;

std::string DescribeProducer(const OnnxGraph& graph, int producer) {
  if (producer == kGraphInput) return "a graph input";
  if (producer == kInitializer) return "an initializer";
  return DescribeOnnxNode(graph.nodes[producer]);
}

// A cycle among `left` (the nodes Kahn's algorithm could not order, each of
// which has a predecessor among them), as "node 'a' (Add) -> node 'b' (Mul) -> node 'a' (Add)".
std::string DescribeCycle(const OnnxGraph& graph, const std::vector<std::vector<int>>& preds,
                          const std::vector<bool>& left, int start) {
  std::unordered_map<int, size_t> seen_at;
  std::vector<int> walk;
  int n = start;
  while (!seen_at.count(n)) {
    seen_at[n] = walk.size();
    walk.push_back(n);
    for (int p : preds[n]) {
      if (left[p]) {
        n = p;
        break;
      }
    }
  }
  // The walk follows producers backwards; print the cycle in dataflow order.
  std::vector<std::string> names;
  for (size_t i = walk.size(); i-- > seen_at[n];) names.push_back(DescribeOnnxNode(graph.nodes[walk[i]]));
  names.push_back(DescribeOnnxNode(graph.nodes[walk.back()]));
  return fmt::format("{}", fmt::join(names, " -> "));
}

}  // namespace

std::string DescribeOnnxNode(const OnnxNode& node) {
  return fmt::format("node '{}' ({})", node.name, node.op_type);
}

Status MissingOnnxValue(const OnnxFreeValue& value) {
  if (value.user.empty()) {
    return NotFound(
        "graph output '{}'{} is produced by no node and is neither a graph input nor an initializer",
        value.name, value.where);
  }
  return NotFound(
      "{}{} takes the input '{}', which no node produces and which is neither a graph input nor an "
      "initializer (a missing initializer?)",
      value.user, value.where, value.name);
}

Status OrderOnnxGraph(OnnxGraph* graph, const std::vector<std::vector<std::string>>& implicit_inputs,
                      std::vector<OnnxFreeValue>* free_values) {
  std::unordered_map<std::string, int> producer;
  for (const OnnxTensor& t : graph->initializers) {
    if (!producer.emplace(t.name, kInitializer).second) {
      return Corrupt("initializer '{}' is defined twice", t.name);
    }
  }
  for (const OnnxValueInfo& in : graph->inputs) {
    if (!producer.emplace(in.name, kGraphInput).second) {
      return Corrupt("graph input '{}' is listed twice", in.name);
    }
  }
  const int n = static_cast<int>(graph->nodes.size());
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : graph->nodes[i].outputs) {
      if (out.empty()) continue;
      auto [it, inserted] = producer.emplace(out, i);
      if (!inserted) {
        return Corrupt("value '{}' is produced twice: by {} and by {}", out,
                       DescribeProducer(*graph, it->second), DescribeOnnxNode(graph->nodes[i]));
      }
    }
  }

  std::unordered_set<std::string> free_names;
  auto use_free = [&](const std::string& name, const std::string& user) {
    if (free_names.insert(name).second) free_values->push_back({name, user, ""});
  };
  std::vector<std::vector<int>> preds(n), succs(n);
  std::vector<int> waiting(n, 0);
  for (int i = 0; i < n; ++i) {
    const OnnxNode& node = graph->nodes[i];
    auto use = [&](const std::string& name) {
      if (name.empty()) return;
      auto it = producer.find(name);
      if (it == producer.end()) {
        use_free(name, DescribeOnnxNode(node));
      } else if (it->second >= 0) {
        preds[i].push_back(it->second);
        succs[it->second].push_back(i);
        ++waiting[i];
      }
    };
    for (const std::string& in : node.inputs) use(in);
    if (i < static_cast<int>(implicit_inputs.size())) {
      for (const std::string& in : implicit_inputs[i]) use(in);
    }
  }
  std::unordered_set<std::string> output_names;
  for (const OnnxValueInfo& out : graph->outputs) {
    if (!output_names.insert(out.name).second) return Corrupt("graph output '{}' is listed twice", out.name);
    if (!producer.count(out.name)) use_free(out.name, "");
  }

  // Kahn's algorithm, always taking the earliest ready node of the file.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int s : succs[i]) {
      if (--waiting[s] == 0) ready.push(s);
    }
  }
  if (static_cast<int>(order.size()) != n) {
    std::vector<bool> left(n, true);
    for (int i : order) left[i] = false;
    int start = 0;
    while (!left[start]) ++start;
    return Corrupt("the graph has a cycle: {}", DescribeCycle(*graph, preds, left, start));
  }
  std::vector<OnnxNode> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(graph->nodes[i]));
  graph->nodes = std::move(sorted);
  return Status::Ok();
}

}  // namespace kiln
