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
      auto session = OnnxSession::Load(path, options);
      if (!session.ok()) return session.status().WithContext(fmt::format("pipeline '{}' model {}", name, path));
      sessions[name] = std::move(*session);
    }
  }
  KILN_ASSIGN_OR_RETURN(Image image, ReadImageFile(image_path));
  std::map<std::string, PipelineModel> models;
  std::map<std::string, PipelineModelSignature> signatures;
  for (const auto& [name, session] : sessions) {
    if (session->outputs().empty()) return InvalidArgument("pipeline model '{}' has no outputs", name);
    models[name] = SessionPipelineModel(session.get());
    PipelineModelSignature& sig = signatures[name];
    for (const OnnxTensorInfo& i : session->inputs()) {
      sig.inputs.push_back(i.name);
      sig.input_dims.push_back(i.dims);
    }
    for (const OnnxTensorInfo& o : session->outputs()) sig.outputs.push_back(o.name);
  }
  KILN_RETURN_IF_ERROR(CheckPipelineModels(spec, signatures));
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
