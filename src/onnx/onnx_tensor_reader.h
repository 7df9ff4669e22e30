// Reads a TensorProto (an initializer, or a tensor attribute such as
// Constant's value) into an OnnxTensor: from raw_data, the typed fields or an
// external data file, checking that the bytes match the shape.
#pragma once

#include <string>

#include "core/status.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_proto.h"
#include "onnx/onnx_read_context.h"

namespace kiln {

// `what` names the tensor in messages ("initializer 'conv.weight'").
Expected<OnnxTensor> ReadOnnxTensor(const onnx_proto::Tensor& proto, const std::string& what,
                                    OnnxReadContext* ctx);

}  // namespace kiln
