// Legalize's rewrites of tensor graphs, applied before placement, for
// every target: the classic misfits of exported graphs turned into what
// backends run well.
//   - BatchNormalization after a convolution folds into its weights and bias;
//   - Identity and inference Dropout disappear;
//   - negative axes become positive (some backends' limits only take those);
//   - constant subgraphs left after import fold (on the CPU, at compile time).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

// Appends one line per rewrite made to `log`.
Status RewriteTensorGraph(Graph& g, std::vector<std::string>* log);

}  // namespace kiln
