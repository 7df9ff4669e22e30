// The models of `kiln detect` and `kiln ocr`: ONNX sessions wrapped as the
// vision pipelines' TensorModel (one input in, the first output back), and
// the writing of their results.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "onnx/onnx_session.h"
#include "vision/image.h"
#include "vision/tensor_model.h"

namespace kiln::cli {

// Loads `path`; a model with other than one input is an error.
Expected<std::unique_ptr<OnnxSession>> LoadVisionModel(const std::string& path, const OnnxSessionOptions& options,
                                                       const char* role);

// Runs `session` (which must outlive the function) on its one input.
TensorModel SessionTensorModel(OnnxSession* session);

// `session` (which must outlive it) as a pipeline stage runs it: every
// input, by name, read where it lies; every output back.
PipelineModel SessionPipelineModel(OnnxSession* session);

// Writes `json` (indented) to `path`, and the drawn image to `draw_path` if
// that is not empty.
Status WriteVisionOutputs(const nlohmann::ordered_json& json, const std::string& path, const Image* drawn,
                          const std::string& draw_path);

}  // namespace kiln::cli
