// The tensor ops of kiln's IR: the ONNX operators (by their ONNX names,
// "Conv", "Gather", ...) and kiln's own fused forms ("kiln.FusedConv"),
// each with the facts every backend and stage shares: how many inputs and
// outputs it takes, and how its output types follow from its inputs and
// attributes (shape inference). Shape inference also computes outputs that
// are known at compile time (Shape, the integer arithmetic on shapes,
// Range over constants), so the compiler can fold them. What runs an op is
// a backend's business (backend/cpu/tensor_kernels/ for the CPU).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/attribute_map.h"
#include "graph/tensor_data.h"
#include "graph/tensor_type.h"

namespace kiln {

// One input as shape inference sees it.
struct TensorOpInput {
  const TensorType* type = nullptr;     // nullptr: an omitted optional input
  const TensorData* constant = nullptr; // set when the value is known at compile time
  bool present() const { return type != nullptr; }
};

struct ShapeContext {
  std::string_view op_type;
  std::string_view node;  // the node's name, for messages
  const AttributeMap* attrs = nullptr;
  std::vector<TensorOpInput> inputs;
  int num_outputs = 1;  // outputs the node asks for (trailing optional ones may be absent)
  int opset = 17;       // the default domain's opset version the model imports

  const AttributeMap& a() const { return *attrs; }
  // Input i, or an omitted one when i is past the end.
  TensorOpInput input(size_t i) const { return i < inputs.size() ? inputs[i] : TensorOpInput{}; }
};

struct ShapeResult {
  std::vector<TensorType> outputs;
  // Per output: its value when known at compile time (integer shape
  // arithmetic, small constant results); empty otherwise.
  std::vector<std::optional<TensorData>> constants;
};

struct TensorOpDef {
  std::string op_type;
  int min_inputs = 1;
  int max_inputs = 1;
  int min_outputs = 1;
  int max_outputs = 1;
  // Output types (and known values). Errors name the node and say what
  // does not agree ("Conv conv1: input channels 3 != weight's 4 x group 1").
  Expected<ShapeResult> (*infer)(const ShapeContext& ctx) = nullptr;
  // Floating-point operations of one call, to price fallbacks and report
  // GFLOP/s; nullptr counts one per output element.
  double (*flops)(const ShapeContext& ctx, const std::vector<TensorType>& outputs) = nullptr;
};

// The op called `op_type`, or nullptr.
const TensorOpDef* FindTensorOp(std::string_view op_type);
// Every op kiln's IR knows, by name.
const std::vector<TensorOpDef>& AllTensorOps();

// Runs op_type's shape inference, after checking the input and output
// counts. The error names the op and the node.
Expected<ShapeResult> InferTensorOp(const ShapeContext& ctx);
// FLOPs of one call of the op with these inputs and outputs.
double TensorOpFlops(const ShapeContext& ctx, const std::vector<TensorType>& outputs);

}  // namespace kiln
