// A model as the vision pipelines see it: one input tensor in, its first
// output back. The commands make one from an OnnxSession; tests from any
// function.
#pragma once

#include <functional>

#include "core/status.h"
#include "onnx/onnx_session.h"

namespace kiln {

using TensorModel = std::function<Expected<HostTensor>(const HostTensor& input)>;

}  // namespace kiln
