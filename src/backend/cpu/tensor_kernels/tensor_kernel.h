// The CPU's kernels for the IR's tensor ops (graph/tensor_op.h). A kernel
// is made once per node at bind time, from the node's attributes and its
// static input and output types, so that everything that can be decided
// then (attribute parsing, broadcasting strides, packed weights, the
// implementation) is; its run function then only computes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/attribute_map.h"
#include "graph/laid_out_weights.h"
#include "graph/tensor_data.h"
#include "graph/tensor_type.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// What a kernel is made from.
struct TensorKernelArgs {
  std::string_view op_type;
  std::string_view node;  // for messages
  const AttributeMap* attrs = nullptr;
  // Input types; an omitted optional input has present[i] false.
  std::vector<TensorType> inputs;
  std::vector<bool> present;
  // Inputs known at compile time (weights, shapes, axes): the kernel may
  // read or pack them now; null for inputs computed at run time. A constant
  // input's pointer is still passed to run().
  std::vector<const TensorData*> constants;
  std::vector<TensorType> outputs;
  int num_threads = 1;
  int opset = 17;  // the default domain's opset the model imports (Softmax's axis semantics change at 13)
  // Constants already in a kernel's layout, and where a kernel records those
  // it lays out (graph/laid_out_weights.h); null for neither.
  LaidOutWeights* laid_out = nullptr;

  const AttributeMap& a() const { return *attrs; }
  bool has(size_t i) const { return i < present.size() && present[i]; }
};

// One call's memory. inputs[i] is null for an omitted input.
struct TensorCall {
  const void* const* inputs = nullptr;
  void* const* outputs = nullptr;
  uint8_t* scratch = nullptr;  // scratch_bytes, 64-byte aligned
  ThreadPool* pool = nullptr;  // null: run on the calling thread
};

struct TensorKernel {
  // Computes the outputs. Errors only for what depends on run-time values
  // (a Gather index out of range), naming the node and the value.
  std::function<Status(const TensorCall&)> run;
  size_t scratch_bytes = 0;
  std::string impl;  // which implementation runs ("onednn", "kiln-avx512", "reference"), for --plan
};

using TensorKernelFactory = Expected<TensorKernel> (*)(const TensorKernelArgs& args);

// Whether a kernel takes its activations in `layout` (other than row-major)
// for these arguments. The layout stage asks before it gives a node the
// attribute activation_layout = TensorLayoutName(layout); the node's
// non-constant rank-4 inputs and its rank-4 outputs are then all in that
// layout (constant inputs such as weights stay row-major). In nchw16c the
// channels are padded to a multiple of 16 and the padding holds zeros:
// every kernel that writes nchw16c writes zeros there.
using TensorLayoutSupport = bool (*)(TensorLayout layout, const TensorKernelArgs& args);

// One op the CPU runs, with what it accepts: the dtypes of its first input
// (or of the input that decides), and a line on the attribute limits
// (`kiln backends` prints it; legalize matches against it).
struct TensorKernelEntry {
  std::string op_type;
  TensorKernelFactory make = nullptr;
  std::vector<DType> dtypes;
  std::string limits;  // "2-d only; auto_pad NOTSET|SAME_UPPER|SAME_LOWER|VALID" ("" for none)
  TensorLayoutSupport takes_layout = nullptr;  // null: row-major only
};

// The kernel entry for op_type, or nullptr.
const TensorKernelEntry* FindTensorKernel(std::string_view op_type);
const std::vector<TensorKernelEntry>& AllTensorKernels();

// Makes the kernel for a node; the error names the node when the factory
// refuses it (an attribute value outside the stated limits).
Expected<TensorKernel> MakeTensorKernel(const TensorKernelArgs& args);

// Each family adds its kernels; tensor_kernel.cc gathers them.
void AddElementwiseKernels(std::vector<TensorKernelEntry>* kernels);
void AddShapeKernels(std::vector<TensorKernelEntry>* kernels);
void AddReduceKernels(std::vector<TensorKernelEntry>* kernels);
void AddConvKernels(std::vector<TensorKernelEntry>* kernels);
void AddMatMulKernels(std::vector<TensorKernelEntry>* kernels);
void AddQuantKernels(std::vector<TensorKernelEntry>* kernels);
void AddLayoutKernels(std::vector<TensorKernelEntry>* kernels);

}  // namespace kiln::cpu
