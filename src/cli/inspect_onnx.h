// `kiln inspect MODEL.onnx`: an ONNX graph's summary.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace kiln::cli {

// True for a path naming an ONNX file (".onnx", any case).
bool IsOnnxPath(const std::string& path);
// IsOnnxPath, or an artifact compiled from an ONNX graph.
bool IsOnnxModelPath(const std::string& path);

// Reads the ONNX model at `path` with the `--input-shape NAME:DIMS`
// overrides and prints its opsets, inputs and outputs (element types and
// shapes), op-type counts and initializer bytes.
Status PrintOnnxSummary(const std::string& path, const std::vector<std::string>& input_shapes);

// Compiles the model for `backend` at its input shapes (every dimension
// fixed by the file or by --input-shape) and prints the plan of the four
// stages; `nodes` adds a line per node. `precision`: the --precision flag
// ("" for the default, fp32).
Status PrintOnnxPlan(const std::string& path, const std::vector<std::string>& input_shapes,
                     const std::string& backend, int threads, bool nodes, const std::string& precision = "");

}  // namespace kiln::cli
