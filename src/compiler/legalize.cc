// The legalize pass.
#include "compiler/legalize.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/backend.h"

namespace kiln {
namespace {

// Flops of the nodes `b` supports and of those it does not.
std::pair<double, double> SplitFlops(const Graph& g, const Backend& b, const std::vector<Node>& nodes,
                                     const ShapeEnv& env) {
  double on = 0, off = 0;
  for (const Node& n : nodes) {
    double f = EstimateCost(g, n, env).flops;
    (b.support().Match(g, n) != nullptr ? on : off) += f;
  }
  return {on, off};
}

}  // namespace

Status Legalize(Graph& g, const Backend& target, const Backend& cpu, const ShapeEnv& cost_env,
                LegalizeReport* report) {
  report->target = target.name();
  report->cost_tokens = cost_env.tokens;
  const bool cpu_target = &target == &cpu;

  std::vector<Node> placed;
  placed.reserve(g.nodes().size());
  // Nodes still to place, in order; a rewrite's output goes to the front.
  std::vector<Node> pending = std::move(g.nodes());
  g.nodes().clear();
  std::reverse(pending.begin(), pending.end());

  while (!pending.empty()) {
    Node node = std::move(pending.back());
    pending.pop_back();
    std::string why_not;
    if (target.support().Match(g, node, &why_not) != nullptr) {
      node.backend = target.name();
      placed.push_back(std::move(node));
      continue;
    }
    bool rewritten = false;
    if (!cpu_target) {
      for (const Rewrite& r : RegisteredRewrites()) {
        if (r.op != node.op) continue;
        size_t values_before = g.values().size();
        std::vector<Node> replacement;
        if (!r.apply(g, node, &replacement)) continue;
        // Worth it when most of the work lands on the target; the parts it
        // cannot run fall back one by one below.
        auto [on, off] = SplitFlops(g, target, replacement, cost_env);
        if (on == 0 || on < off) {
          g.values().resize(values_before);
          continue;
        }
        report->rewrites.push_back(fmt::format("{} -> {} ({})", OpName(node.op), r.name, node.name));
        for (auto it = replacement.rbegin(); it != replacement.rend(); ++it) pending.push_back(std::move(*it));
        rewritten = true;
        break;
      }
    }
    if (rewritten) continue;

    std::string cpu_why;
    if (cpu.support().Match(g, node, &cpu_why) == nullptr) {
      return Unsupported("node {} ({}): not supported by the {} backend either: {}", node.name,
                         node.op == OpKind::kTensorOp ? node.op_type : OpName(node.op), cpu.name(), cpu_why);
    }
    node.backend = cpu.name();
    if (!cpu_target) {
      NodeCost cost = EstimateCost(g, node, cost_env);
      Fallback f;
      f.node = node.name;
      f.op = node.op;
      f.op_type = node.op_type;
      f.reason = why_not;
      f.flops = cost.flops;
      // The node's activations cross to host memory and back (an upper
      // bound: neighbours on the CPU share them for free).
      f.bytes_moved = cost.activation_bytes;
      report->fallbacks.push_back(std::move(f));
    }
    placed.push_back(std::move(node));
  }
  g.nodes() = std::move(placed);
  for (const Node& n : g.nodes()) {
    if (n.backend == target.name()) {
      ++report->nodes_on_target;
    } else {
      ++report->nodes_on_cpu;
    }
  }
  return g.Compact();
}

}  // namespace kiln
