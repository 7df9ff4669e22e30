// Checks a graph's dataflow and puts its nodes in topological order: every
// value produced once, every node input produced somewhere, no cycle.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "onnx/onnx_model.h"

namespace kiln {

// A value a graph uses but does not produce itself (in a subgraph, a value of
// an enclosing graph), with its first user for messages: a node ("node 'add'
// (Add)") or, when `user` is empty, the graph's output of that name; `where`
// says which subgraph (" in the subgraph 'then_branch' of node 'if' (If)", or "").
struct OnnxFreeValue {
  std::string name;
  std::string user;
  std::string where;
};

// Orders `graph->nodes` so that producers come before their users (keeping
// the file's order where it already is one). `implicit_inputs[i]` are the
// values node i's subgraphs take from this graph. Values used but produced
// nowhere in the graph are returned in `free_values`; a value produced twice
// or a cycle is an error naming the nodes.
Status OrderOnnxGraph(OnnxGraph* graph, const std::vector<std::vector<std::string>>& implicit_inputs,
                      std::vector<OnnxFreeValue>* free_values);

// "node 'conv1' (Conv)".
std::string DescribeOnnxNode(const OnnxNode& node);

// The error for a value nothing produces, naming its user.
Status MissingOnnxValue(const OnnxFreeValue& value);

}  // namespace kiln
