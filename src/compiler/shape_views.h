// Stage 2 for tensor graphs, after the layouts and domains: nodes that only
// rename the dims of their input's bytes (Reshape, Flatten, Squeeze,
// Unsqueeze on row-major data) or take a contiguous run of them (a Slice
// or Split along the channels of one image, row-major or along whole
// nchw16c blocks) run on the CPU as copies. Where the output can share the
// input's buffer it becomes a view of it instead (Value::view_of, at
// col_offset elements in) and the node goes, so it costs no step and no
// bytes at run time. Not where either side is caller memory (a graph input
// or output) or a constant, where the layouts or memory domains differ, or
// on another backend; a window starts 64-byte aligned.
#pragma once

#include <string>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

// `cpu_backend` names the backend whose kernels those ops are copies.
// Returns the number of nodes made views; compacts the graph.
Expected<int> MakeViews(Graph& g, const std::string& cpu_backend);

}  // namespace kiln
