// Stage 1, legalize: match every node against the target backend's support
// list; where a node does not fit, try the registered rewrites
// (decompositions) whose results do fit; assign what still does not fit to
// the CPU backend, which supports everything, and record each such fallback
// with what it costs.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class Backend;

struct Fallback {
  std::string node;    // node name
  OpKind op = OpKind::kAdd;
  std::string op_type;  // kTensorOp: the tensor op's name
  std::string reason;  // why the target refused it
  // Estimated at the cost shape: the work moved to the CPU, and the bytes
  // that cross between memory domains because of it.
  double flops = 0;
  double bytes_moved = 0;
};

struct LegalizeReport {
  std::string target;
  int64_t cost_tokens = 0;  // the token count the costs were estimated at
  int nodes_on_target = 0;
  int nodes_on_cpu = 0;
  std::vector<std::string> rewrites;  // "attention -> gather_kv + attn_scores + ... (model.layers.0...)"
  std::vector<Fallback> fallbacks;
};

// A rewrite replaces one node with an equivalent sequence of nodes (adding
// values to the graph as needed); it returns false when it does not apply.
struct Rewrite {
  std::string name;
  OpKind op;  // the op it rewrites
  bool (*apply)(Graph& g, const Node& node, std::vector<Node>* replacement);
};

// The rewrites legalize may use, in order of preference.
const std::vector<Rewrite>& RegisteredRewrites();

// Places every node of `g` on `target` or on `cpu`. REQUIRES: cpu supports
// every op of the graph (an error names the node otherwise).
Status Legalize(Graph& g, const Backend& target, const Backend& cpu, const ShapeEnv& cost_env,
                LegalizeReport* report);

}  // namespace kiln
