// ONNX into kiln's graph IR: every ONNX node becomes a tensor_op node with
// static types, given the types of the graph inputs. On the way, shape
// inference runs node by node; nodes whose inputs are all known at compile
// time (the shape subgraphs, Range, constant arithmetic) are folded into
// constants by running them on the CPU, so that what reaches the compiler
// has static shapes. Errors name the node (and its op and domain).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "onnx/onnx_model.h"

namespace kiln {

class ThreadPool;

struct OnnxImport {
  Graph graph;
  // Values of the graph inputs and outputs, in the model's order; their
  // io_slot is their index here (inputs first, then outputs).
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  // "Range /pos/Range: folded to i64[197]" and the like.
  std::vector<std::string> folded;
  int nodes_in_model = 0;
};

// Folding stops at outputs larger than this (a constant Expand to a big
// mask is cheaper to compute at run time than to keep in memory).
inline constexpr size_t kMaxFoldedBytes = size_t{16} << 20;

// `input_types` in the order of model.graph.inputs. `fixed`: inputs whose
// values are bound at compile time (a shape or scales given as a graph
// input): the graph reads them as constants; their io slot stays, unread.
Expected<OnnxImport> ImportOnnxGraph(const OnnxModel& model, const std::vector<TensorType>& input_types,
                                     const std::map<std::string, TensorData>& fixed = {});

}  // namespace kiln
