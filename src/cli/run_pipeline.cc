#include "cli/run_pipeline.h"

#include <fmt/format.h>

#include <memory>

#include "cli/vision_models.h"
#include "compiler/shared_arenas.h"
#include "vision/image_file.h"
#include "vision/pipeline_artifact.h"
#include "vision/pipeline_runner.h"

namespace kiln::cli {

bool IsPipelineFile(const std::string& path) {
  return IsPipelineFilePath(path) || IsPipelineArtifact(path);
}

Status RunPipelineCommand(const std::string& pipeline_path, const std::string& image_path,
                          const std::string& json_path, int threads, bool recompile_if_stale) {
  if (image_path.empty() || json_path.empty()) return InvalidArgument("a pipeline runs with --image IMG --json OUT.json");
  OnnxSessionOptions options;
  options.threads = threads;
  options.recompile_if_stale = recompile_if_stale;
  // The models run one after another, each shape once at a time: one
  // activation arena for all of them.
  options.shared_arenas = std::make_shared<SharedArenas>();
  PipelineSpec spec;
  std::map<std::string, std::unique_ptr<OnnxSession>> sessions;
  if (IsPipelineArtifact(pipeline_path)) {
    KILN_ASSIGN_OR_RETURN(LoadedPipeline loaded, OpenPipelineArtifact(pipeline_path, options));
    spec = std::move(loaded.spec);
    sessions = std::move(loaded.sessions);
  } else {
    KILN_ASSIGN_OR_RETURN(spec, ReadPipelineFile(pipeline_path));
    for (const auto& [name, path] : spec.models) {
      const std::string role = fmt::format("pipeline '{}'", name);
      KILN_ASSIGN_OR_RETURN(sessions[name], LoadVisionModel(path, options, role.c_str()));
    }
  }
  KILN_ASSIGN_OR_RETURN(Image image, ReadImageFile(image_path));
  std::map<std::string, TensorModel> models;
  std::map<std::string, std::vector<int64_t>> input_dims;
  for (const auto& [name, session] : sessions) {
    if (session->inputs().size() != 1 || session->outputs().empty()) {
      return InvalidArgument("pipeline model '{}' has {} inputs and {} outputs; expected one input", name,
                             session->inputs().size(), session->outputs().size());
    }
    models[name] = SessionTensorModel(session.get());
    input_dims[name] = session->inputs()[0].dims;
  }
  KILN_RETURN_IF_ERROR(CheckPipelineModelInputs(spec, input_dims));
  KILN_ASSIGN_OR_RETURN(nlohmann::ordered_json result, RunPipeline(spec, models, image, image_path));
  KILN_RETURN_IF_ERROR(WriteVisionOutputs(result, json_path, nullptr, ""));
  fmt::print("{} stages on {} ({}x{}) -> {}\n", spec.stages.size(), image_path, image.width, image.height, json_path);
  const SharedArenas& arenas = *options.shared_arenas;
  fmt::print("activations: one arena of {} bytes ({:.2f} MiB) for {} compiled graphs of {} models; separate "
             "arenas would take {} bytes\n",
             arenas.shared_bytes(), static_cast<double>(arenas.shared_bytes()) / (1 << 20), arenas.needs().size(),
             sessions.size(), arenas.separate_bytes());
  return Status::Ok();
}

}  // namespace kiln::cli
