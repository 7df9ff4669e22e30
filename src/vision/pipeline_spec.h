// A pipeline file: models wired into stages, read from JSON or YAML and checked
// before anything runs (docs/pipelines.md has the format).
//   {"models": {"det": "det.onnx", ...},          paths relative to the file
//    "stages": [{"name": "boxes", "kind": "db_postprocess",
//                "input": "det", "det_input": "det_in"}, ...],
//    "outputs": ["boxes", ...]}                    optional
// Each stage kind has named inputs (ports) that take given kinds of value;
// a port names another stage, or "image" (the picture the pipeline runs
// on). Stages may be listed in any order: they run in an order in which
// every stage follows the stages it reads. Stages that read a crop stage's
// crops (directly or through other stages) run once per crop.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln {

// What a stage produces.
enum class PipelineValue {
  kImage,        // the pipeline's input picture
  kTensor,       // one tensor
  kCropTensors,  // one tensor per crop
  kTextBoxes,    // DB post-processing's quadrilaterals
  kDetections,   // YOLO boxes with classes
  kCrops,        // pieces of the picture, each with its box
  kLines,        // recognized text, one per crop kept
  kClasses,      // a class per crop
};

const char* PipelineValueName(PipelineValue v);

struct PipelineStage {
  std::string name;
  std::string kind;
  std::map<std::string, std::string> inputs;  // port -> stage name or "image"
  std::string model;                          // model stages: a key of `models`
  nlohmann::json params;                      // the kind's settings (object)
  PipelineValue produces = PipelineValue::kTensor;
  // A tensor-producing stage's shape, -1 where it varies per image or crop.
  std::vector<int64_t> shape;
};

struct PipelineSpec {
  std::map<std::string, std::string> models;  // name -> path (resolved)
  std::vector<PipelineStage> stages;          // in run order
  std::vector<std::string> outputs;           // stages whose results are written
};

// The known stage kinds, for messages and docs.
std::vector<std::string> PipelineStageKinds();

// `base_dir`: where relative paths (models, dictionaries) start.
// `check_files`: a model or dictionary file that does not exist is an error.
Expected<PipelineSpec> ParsePipeline(const nlohmann::json& json, const std::string& base_dir, bool check_files = true);
// A pipeline file, JSON (.json) or YAML (.yaml, .yml; pipeline_yaml.h).
Expected<PipelineSpec> ReadPipelineFile(const std::string& path);

// Whether `path` names a pipeline file by its extension (.json, .yaml, .yml).
bool IsPipelineFilePath(const std::string& path);

// A pipeline file's text as the JSON tree ParsePipeline checks: parsed as
// YAML when `path` ends in .yaml or .yml, else as JSON.
Expected<nlohmann::json> PipelineTextToJson(const std::string& text, const std::string& path);

// Every model stage's input shape against its model's declared input dims
// (-1 where the model leaves one open): ranks and fixed dimensions must meet.
Status CheckPipelineModelInputs(const PipelineSpec& spec,
                                const std::map<std::string, std::vector<int64_t>>& model_input_dims);

const PipelineStage* FindPipelineStage(const PipelineSpec& spec, const std::string& name);

}  // namespace kiln
