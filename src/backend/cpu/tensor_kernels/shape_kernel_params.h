// How the shape family's kernels get the parameters that come from small
// inputs (Slice's starts, Pad's pads, Resize's scales): from the node's
// constants when the kernel is made, or else from the call's buffers at
// run time, checked against the output shape fixed at compile time.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_ops/shape_op_params.h"

namespace kiln::cpu::shape_kernels {

// What a kernel keeps of its arguments to resolve parameters later.
class KernelParams {
 public:
  explicit KernelParams(const TensorKernelArgs& args);

  // Parameters from the constants known now.
  shape_ops::OpParamSource AtBind() const;
  // Parameters from a call's input buffers.
  shape_ops::OpParamSource AtRun(const void* const* inputs) const;
  // Whether every input in `which` is either omitted or a constant.
  bool Known(std::initializer_list<size_t> which) const;

  const std::string& op_type() const { return op_type_; }
  const std::string& node() const { return node_; }
  const std::vector<TensorType>& inputs() const { return inputs_; }

 private:
  std::string op_type_;
  std::string node_;
  AttributeMap attrs_;
  std::vector<TensorType> inputs_;
  std::vector<bool> present_;
  std::vector<const void*> constants_;
};

// The bytes of one element of a dtype the data-movement kernels accept
// (1, 2, 4 or 8), or an error naming the dtype.
Expected<size_t> MovableElementBytes(DType dtype);

// Every plain dtype, for ops that only move bytes.
const std::vector<DType>& MovableDTypes();

}  // namespace kiln::cpu::shape_kernels
