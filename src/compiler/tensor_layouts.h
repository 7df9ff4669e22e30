// Stage 2 for tensor graphs, first part: the activation layout of every
// 4-d value. A backend may want a node's activations in another layout
// than row-major (the CPU: nchw16c at convolutions whose fast path is
// oneDNN's blocked kernels; an accelerator: nhwc where its kernels index
// so); from each such node the layout grows over neighbours on the same
// backend that take it. Each node in a layout L reads its non-constant 4-d
// inputs and writes its 4-d outputs in L and gets the attribute
// activation_layout = TensorLayoutName(L); a kiln.Reorder (run by the CPU)
// converts at every border, and two reorders that meet (L -> row-major ->
// L) cancel, so a value leaves a chain at most once, in one reorder shared
// by all its row-major readers. Graph inputs and outputs stay row-major
// (they are the caller's buffers). A node the backend lets read its first
// input row-major (a stem convolution writing nchw16c) reads it so where
// that input comes from outside the chain: no reorder there, and the node
// gets input_layout = "row-major". Convolution weights are constants: they
// stay as they are and each kernel lays them out once when it is made.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class BackendRegistry;

// What the stage asks about a node; BackendLayoutQuestions asks the node's
// backend (Backend::WantedLayout / TakesLayout).
struct LayoutQuestions {
  std::function<TensorLayout(const Graph& g, const Node& node)> wanted;
  std::function<bool(const Graph& g, const Node& node, TensorLayout layout)> takes;
  // Whether `node`, run in `layout`, reads its first input row-major (a
  // stem convolution; Backend::ReadsRowMajorInput). Empty: no node does.
  std::function<bool(const Graph& g, const Node& node, TensorLayout layout)> reads_row_major;
  std::string reorder_backend = "cpu";  // who runs kiln.Reorder
};
LayoutQuestions BackendLayoutQuestions(const BackendRegistry& backends);

// What the stage decided, for the plan.
struct TensorLayoutDecisions {
  std::vector<std::string>
      lines;  // "activations nchw16c on cpu: 12 nodes, 14 values (c1, r1, ...)", one per reorder
  int reorders_inserted = 0;   // at layout borders, before cancelling
  int reorders_cancelled = 0;  // pairs that met
  int reorders_kept = 0;
};

// Chooses the layouts and inserts the reorders (placed, so run it after
// legalize and fusion and before the domains and transfers).
Status ChooseTensorLayouts(Graph& g, const LayoutQuestions& ask, TensorLayoutDecisions* decisions);

// Makes every pair of reorders that meet (X -> Y then Y -> X) cancel: the
// readers of the second read the first's input; reorders nobody reads are
// dropped. Returns the number of pairs cancelled.
Expected<int> CancelMeetingReorders(Graph& g);

}  // namespace kiln
