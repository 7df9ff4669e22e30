// Runs a checked pipeline (pipeline_spec.h) on one image, stage by stage in
// run order, with its models given as TensorModels; stages fed by crops run
// once per crop (a model sees each crop's own shape bucket). The result:
//   {"image": PATH, "width": W, "height": H,
//    "stages": {NAME: {"kind": KIND, <its results>}, ...}}
// for the pipeline's outputs, where the results are, by what a stage
// produces: "detections" as kiln detect writes them, "boxes" (text boxes:
// corners and score), "lines" as kiln ocr writes them, "classes"
// ([{"box", "class", "score"}] per crop), "crops" ([{"box", "width",
// "height", "turned"}]); a model stage's "shapes" (its first output's) and
// "outputs" ({NAME: [{"dtype", "shape", "values"}, ...]}, every output, one
// entry per run).
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "vision/image.h"
#include "vision/pipeline_spec.h"
#include "vision/tensor_model.h"

namespace kiln {

// `models`: one per name in spec.models.
Expected<nlohmann::ordered_json> RunPipeline(const PipelineSpec& spec, const std::map<std::string, PipelineModel>& models,
                                             const Image& image, const std::string& image_path);

// The same with models of one input each (TensorModel: its one output).
Expected<nlohmann::ordered_json> RunPipeline(const PipelineSpec& spec, const std::map<std::string, TensorModel>& models,
                                             const Image& image, const std::string& image_path);

}  // namespace kiln
