#include "vision/tensor_model.h"

namespace kiln {

PipelineModel OneInputPipelineModel(TensorModel model) {
  PipelineModel m;
  m.inputs = {"input"};
  m.outputs = {"output"};
  m.run = [model = std::move(model)](const std::vector<const HostTensor*>& inputs) -> Expected<std::vector<HostTensor>> {
    if (inputs.size() != 1) return InvalidArgument("the model takes one input, not {}", inputs.size());
    KILN_ASSIGN_OR_RETURN(HostTensor out, model(*inputs[0]));
    std::vector<HostTensor> outputs;
    outputs.push_back(std::move(out));
    return outputs;
  };
  return m;
}

}  // namespace kiln
