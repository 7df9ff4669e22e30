// The graph inputs of `kiln run`, `kiln diff` and `kiln bench` on ONNX
// models: `--input NAME=FILE.npy` (or an ONNX TensorProto FILE.pb).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "onnx/onnx_session.h"

namespace kiln::cli {

Expected<std::map<std::string, HostTensor>> ReadOnnxFeeds(const std::vector<std::string>& specs);

// The session options from --input-shape NAME:DIMS and --fixed-input NAME
// (whose value comes from `feeds`).
Expected<OnnxSessionOptions> OnnxOptionsFromFlags(const std::vector<std::string>& input_shapes,
                                                  const std::vector<std::string>& fixed_inputs,
                                                  const std::map<std::string, HostTensor>& feeds);

}  // namespace kiln::cli
