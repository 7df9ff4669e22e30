// Stage 3 for tensor graphs, the patterns exporters write for transformer
// blocks, each replaced by the op that computes it in one pass:
//   ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div [, Mul scale]
//     [, Add bias] over the last axis           -> LayerNormalization
//   x * 0.5 * (1 + Erf(x / sqrt 2)), in either order of the products
//                                                -> Gelu (exact)
//   MatMul -> Add of a constant row of N values  -> kiln.FusedMatMul
// Where the backend running the nodes has the fused op, the nodes share that
// backend, and no intermediate value has another reader or is a graph output.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class BackendRegistry;

// Marks the replaced nodes dead (the caller compacts) and logs one line per
// fusion.
Status FuseTransformerPatterns(Graph& g, const BackendRegistry& backends, std::vector<std::string>* log);

}  // namespace kiln
