// The C API's tensors (kiln_tensor) matched to an ONNX model's inputs and
// outputs: by name or position, each dtype, shape and buffer checked, so
// that a run reaches the compiled graph only with buffers that fit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "graph/tensor_type.h"
#include "kiln/kiln.h"
#include "onnx/onnx_session.h"

namespace kiln::capi {

// The kiln DType of a C dtype (whatever int the caller passed), or an error
// naming `what`.
Expected<DType> FromCDType(const kiln_dtype& dtype, const char* what);

// The C dtype of a kiln DType; nullopt for one the C API has no name for.
std::optional<kiln_dtype> ToCDType(DType dtype);

// Whether to require a buffer (a run) or only read the types (sizing).
enum class BufferUse { kTypesOnly, kRead, kWrite };

// `tensors[0..count)` matched to `slots` (the model's inputs or outputs;
// `what` is "input" or "output"): the result is in `slots` order. Each
// slot must be given exactly once, by name or, for a NULL name, by the
// tensor's position; dtypes must equal the slot's. Shapes are checked for
// being well-formed here (the model checks that they fit). With a buffer
// use, data must be non-NULL and size_bytes hold the tensor.
Expected<std::vector<TensorRef>> BindTensors(const kiln_tensor* tensors, size_t count,
                                             const std::vector<OnnxTensorInfo>& slots, const char* what,
                                             BufferUse use);

// One tensor (named `label` in messages) checked as BindTensors checks
// each: a known dtype, well-formed dims and, with a buffer use, a non-NULL
// buffer of at least the tensor's size.
Expected<TensorRef> CheckedTensor(const kiln_tensor& t, const std::string& label, BufferUse use);

// An error when any two of these buffers share a byte (an output written
// over an input the graph may still read, or two outputs over each other).
Status CheckNoOverlap(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs,
                      const std::vector<OnnxTensorInfo>& input_info,
                      const std::vector<OnnxTensorInfo>& output_info);

}  // namespace kiln::capi
