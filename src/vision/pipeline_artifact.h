// A pipeline compiled into one artifact (`kiln compile PIPELINE.json -o
// OUT.kiln`), in the .kiln container (format/artifact_file.h):
//   metadata    kind "pipeline"; per model its section and the provenance its
//               own artifact records (kiln version, ISA, options, the model
//               files' sizes and xxh64); per dictionary its section and hash
//   pipeline    the pipeline file, as read (JSON)
//   model.N     each model's ONNX artifact (onnx_artifact.h), whole: its
//               sections as it stores them, at page boundaries of this file,
//               mapped and used in place
//   dict.N      each CTC dictionary's text
// A model input the pipeline leaves open is compiled once at a sample
// shape (its producing stage's shape, open dimensions at 320), so that its
// convolutions' layouts are stored, as --sample-shape does.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "onnx/onnx_session.h"
#include "vision/pipeline_spec.h"

namespace kiln {

struct PipelineArtifactSummary {
  int models = 0;
  int64_t bytes = 0;
};

// `options`: backend, precision and threads for every model.
Expected<PipelineArtifactSummary> CompilePipelineArtifact(const std::string& pipeline_path,
                                                          const OnnxSessionOptions& options, const std::string& output);

// Whether `path` is a pipeline artifact.
bool IsPipelineArtifact(const std::string& path);

struct LoadedPipeline {
  PipelineSpec spec;
  std::map<std::string, std::unique_ptr<OnnxSession>> sessions;  // by model name
  nlohmann::json metadata;
};

// Opens `path` (the container's checksums, and every model's, checked) and
// loads its models' sessions from their stored artifacts. A model stored for
// another kernel-layout version or an ISA this CPU lacks is refused, or with
// options.recompile_if_stale the whole pipeline is rebuilt in place from the
// pipeline file and model files it records (which must be there, unchanged).
Expected<LoadedPipeline> OpenPipelineArtifact(const std::string& path, const OnnxSessionOptions& options);

}  // namespace kiln
