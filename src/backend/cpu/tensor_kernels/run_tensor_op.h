// Runs one tensor op on the CPU on compile-time tensors: shape inference,
// the kernel, one call. The compiler folds constant subgraphs with it, and
// the kernels' tests drive ops through it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/attribute_map.h"
#include "graph/tensor_data.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

struct TensorOpRun {
  std::string op_type;
  std::string node = "node";
  AttributeMap attrs;
  std::vector<std::optional<TensorData>> inputs;  // nullopt: an omitted input
  int num_outputs = 1;
  int opset = 17;
  // Treat the inputs as compile-time constants in the kernel's arguments
  // (as for weights); false passes them only at run time.
  bool inputs_are_constants = false;
  ThreadPool* pool = nullptr;
};

Expected<std::vector<TensorData>> RunTensorOp(const TensorOpRun& run);

}  // namespace kiln::cpu
