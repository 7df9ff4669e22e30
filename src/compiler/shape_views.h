// Stage 2 for tensor graphs, after the domains: a node that only renames
// the dims of row-major bytes (Reshape, Flatten, Squeeze, Unsqueeze) runs
// on the CPU as a copy; where its output can share its input's buffer it
// becomes a view of it instead (Value::view_of) and the node goes, so it
// costs no step and no bytes at run time. Not where either side is caller
// memory (a graph input or output), a constant, in a blocked layout, in
// another memory domain or on another backend.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

// `cpu_backend` names the backend whose kernels those ops are copies.
// Returns the number of nodes made views; compacts the graph.
Expected<int> MakeShapeOnlyNodesViews(Graph& g, const std::string& cpu_backend);

}  // namespace kiln
