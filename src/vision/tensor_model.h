// Models as the vision code sees them. A TensorModel: one input tensor in,
// its first output back (kiln detect, kiln ocr). A PipelineModel: named
// inputs in, every output back, as pipeline stages use them. The commands
// make them from an OnnxSession; tests from any function.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "onnx/onnx_session.h"

namespace kiln {

using TensorModel = std::function<Expected<HostTensor>(const HostTensor& input)>;

struct PipelineModel {
  std::vector<std::string> inputs;   // names, in the order `run` takes them
  std::vector<std::string> outputs;  // names, in the order `run` returns them
  // The inputs are only read, where they lie.
  std::function<Expected<std::vector<HostTensor>>(const std::vector<const HostTensor*>& inputs)> run;
};

// A TensorModel as a PipelineModel of one input, "input", and one output,
// "output".
PipelineModel OneInputPipelineModel(TensorModel model);

}  // namespace kiln
