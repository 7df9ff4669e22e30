// Reads a GraphProto (the model's graph, or a subgraph attribute of If, Loop
// or Scan) into an OnnxGraph: value infos, initializers, nodes with their
// attributes, in topological order.
#pragma once

#include <vector>

#include "core/status.h"
#include "onnx/onnx_graph_order.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_proto.h"
#include "onnx/onnx_read_context.h"

namespace kiln {

struct OnnxGraphRead {
  OnnxGraph graph;
  // Values the graph uses from enclosing graphs (none allowed for the main graph).
  std::vector<OnnxFreeValue> free_values;
};

// `depth` is 0 for the model's graph, one more for each subgraph level. The
// model's graph applies the input-shape overrides and needs every input's
// shape; a subgraph's inputs may leave theirs open.
Expected<OnnxGraphRead> ReadOnnxGraph(const onnx_proto::Graph& proto, int depth, OnnxReadContext* ctx);

}  // namespace kiln
