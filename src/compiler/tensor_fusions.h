// Stage 3 for tensor graphs: a convolution and what follows it become one
// kiln.FusedConv when they run on the same backend and that backend has it:
//   Conv -> activation (Relu, LeakyRelu, Clip, HardSigmoid, HardSwish,
//           Sigmoid, Tanh, and SiLU written as Mul(x, Sigmoid(x)));
//   Conv -> Add(residual) [-> activation].
// The intermediate values must have no other reader and not be graph outputs.
// Then the transformer patterns (transformer_fusions.h).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class BackendRegistry;

Status FuseTensorOps(Graph& g, const BackendRegistry& backends, std::vector<std::string>* log);

}  // namespace kiln
