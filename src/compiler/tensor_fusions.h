// Stage 3 for tensor graphs: a convolution and what follows it become one
// kiln.FusedConv when they run on the same backend and that backend has it:
//   Conv -> activation (Relu, LeakyRelu, Clip, HardSigmoid, HardSwish,
//           Sigmoid, Tanh; SiLU written as Mul(x, Sigmoid(x)); HardSwish
//           written as Mul(x, HardSigmoid(x; 1/6, 1/2)) or with
//           Clip(x + 3, 0, 6) / 6);
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
