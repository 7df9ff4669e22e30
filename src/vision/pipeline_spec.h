// A pipeline file: models wired into stages, read from JSON or YAML and checked
// before anything runs (docs/pipelines.md has the format).
//   {"models": {"det": "det.onnx", ...},          paths relative to the file
//    "stages": [{"name": "boxes", "kind": "db_postprocess",
//                "input": "det", "det_input": "det_in"}, ...],
//    "outputs": ["boxes", ...]}                    optional
// Each stage kind has named inputs (ports) that take given kinds of value;
// a port names another stage, or "image" (the picture the pipeline runs
// on), or "stage.output" (a model stage's output other than its first). A
// model stage takes one "input", or "inputs" naming a source for each of its
// model's inputs; a "constant" stage is a tensor the file gives. Stages may be listed in any order: they run in an order in which
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
  // Ports that read a model stage's output other than its first, written
  // "stage.output": port -> the output's name (the stage is in `inputs`).
  std::map<std::string, std::string> input_outputs;
  std::string model;                          // model stages: a key of `models`
  // Model stages fed by "inputs": {MODEL_INPUT: SOURCE, ...}: `inputs` is
  // keyed by the model's input names (else its one port is "input").
  bool named_inputs = false;
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

// A loaded model's inputs and outputs, as the checks below see them.
struct PipelineModelSignature {
  std::vector<std::string> inputs;               // names, in the model's order
  std::vector<std::vector<int64_t>> input_dims;  // declared dims, -1 where open
  std::vector<std::string> outputs;              // names, in the model's order
};

// Every model stage against its model: a stage fed by "input" needs a model
// of one input, one fed by "inputs" must wire each of the model's inputs,
// and no other; each input's shape must meet the declared dims (ranks and
// the dimensions both fix); and every "stage.output" read must name an
// output of that stage's model.
Status CheckPipelineModels(const PipelineSpec& spec, const std::map<std::string, PipelineModelSignature>& models);

const PipelineStage* FindPipelineStage(const PipelineSpec& spec, const std::string& name);

}  // namespace kiln
