// Loading weights, tokenizer and generation config for an engine.
#include "engine/model_loader.h"

#include <chrono>
#include <filesystem>

#include "backend/collective.h"
#include "core/log.h"
#include "core/page_prefault.h"
#include "engine/model_artifact.h"
#include "format/artifact_file.h"
#include "format/model_config.h"
#include "format/presets.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

Expected<std::shared_ptr<const WeightStore>> LoadWeights(const EngineOptions& options) {
  if (options.load_format == "dummy") {
    ModelConfig config;
    if (!options.preset.empty()) {
      KILN_ASSIGN_OR_RETURN(config, PresetConfig(options.preset));
    } else {
      std::string config_path = (std::filesystem::path(options.model) / "config.json").string();
      KILN_ASSIGN_OR_RETURN(config, ModelConfigFromHfFile(config_path));
    }
    KILN_ASSIGN_OR_RETURN(auto weights, WeightStore::Dummy(config, options.dummy_dtype, options.dummy_seed));
    return std::shared_ptr<const WeightStore>(std::move(weights));
  }
  KILN_ASSIGN_OR_RETURN(auto weights, WeightStore::Open(options.model));
  return std::shared_ptr<const WeightStore>(std::move(weights));
}

}  // namespace

Status LoadedModel::FinishTokenizer() {
  if (!pending_tokenizer.valid()) return Status::Ok();
  // The wait goes into the first pass's page faults, a step at a time.
  while (prefault != nullptr && pending_tokenizer.wait_for(std::chrono::seconds(0)) != std::future_status::ready &&
         prefault->Step()) {
  }
  const Expected<std::shared_ptr<const Tokenizer>>& built = pending_tokenizer.get();
  if (!built.ok()) return built.status();
  tokenizer = *built;
  pending_tokenizer = {};
  return Status::Ok();
}

Expected<LoadedModel> LoadModel(const EngineOptions& options, TokenizerLoad when) {
  KILN_RETURN_IF_ERROR(options.Validate());
  const bool opened = options.opened_artifact != nullptr && options.opened_artifact->file->name() == options.model;
  if (!options.model.empty() && (opened || IsArtifactFile(options.model))) {
    if (options.tensor_parallel_size > 1) {
      return Unsupported("{}: a compiled artifact cannot be split for tensor parallelism; give the model it was "
                         "compiled from", options.model);
    }
    if (options.pipeline_parallel_size > 1) {
      return Unsupported("{}: a compiled artifact cannot be split into pipeline stages; give the model it was "
                         "compiled from", options.model);
    }
    return LoadArtifact(options, when);
  }
  if (options.tensor_parallel_size > 1 &&
      (options.collective == nullptr || options.collective->size() != options.tensor_parallel_size)) {
    return InvalidArgument(
        "--tensor-parallel-size {} needs as many processes started together by mpirun (mpirun -np {} kiln ...)",
        options.tensor_parallel_size, options.tensor_parallel_size);
  }
  // The stage: set where tensor parallelism splits each stage too, else the
  // rank in the group of stages.
  const int stage = options.pipeline_stage >= 0 ? options.pipeline_stage
                    : options.collective != nullptr && options.tensor_parallel_size == 1 &&
                            options.collective->size() == options.pipeline_parallel_size
                        ? options.collective->rank()
                        : -1;
  if (options.pipeline_parallel_size > 1 && (options.collective == nullptr || stage < 0)) {
    const int ranks = options.tensor_parallel_size * options.pipeline_parallel_size;
    return InvalidArgument(
        "--pipeline-parallel-size {} needs as many processes started together by mpirun (mpirun -np {} kiln ...)",
        options.pipeline_parallel_size, ranks);
  }
  LoadedModel loaded;
  KILN_ASSIGN_OR_RETURN(loaded.weights, LoadWeights(options));
  if (options.pipeline_parallel_size > 1) {
    const int64_t full_bytes = loaded.weights->TotalBytes();
    KILN_ASSIGN_OR_RETURN(loaded.weights, WeightStore::PipelineStage(std::move(loaded.weights), stage,
                                                                     options.pipeline_parallel_size));
    const ModelConfig& c = loaded.weights->config();
    KILN_LOG_INFO("pipeline stage {} of {}: decoder layers {} to {} of {}{}{}, {} MiB of the model's {} MiB "
                  "of weights",
                  stage, options.pipeline_parallel_size, c.StageLayerBegin(),
                  c.StageLayerEnd() - 1, c.num_layers, c.FirstStage() ? ", the embeddings" : "",
                  c.LastStage() ? ", the final norm and LM head" : "", loaded.weights->TotalBytes() >> 20,
                  full_bytes >> 20);
  }
  if (options.tensor_parallel_size > 1) {
    const int64_t full_bytes = loaded.weights->TotalBytes();
    KILN_ASSIGN_OR_RETURN(loaded.weights, WeightStore::TensorParallelShard(std::move(loaded.weights),
                                                                           options.collective->rank(),
                                                                           options.tensor_parallel_size));
    KILN_LOG_INFO("tensor parallel rank {} of {}: {} MiB of the model's {} MiB of weights",
                  options.collective->rank(), options.tensor_parallel_size, loaded.weights->TotalBytes() >> 20,
                  full_bytes >> 20);
  }

  // Generated weights have a tokenizer only when one is named or the model
  // folder has one; real weights always need theirs.
  std::string tokenizer_path = options.tokenizer;
  if (tokenizer_path.empty() && !options.model.empty()) tokenizer_path = options.model;
  if (!tokenizer_path.empty()) {
    auto tokenizer = LoadTokenizer(tokenizer_path);
    if (tokenizer.ok()) {
      loaded.tokenizer = std::shared_ptr<const Tokenizer>(std::move(tokenizer).value());
    } else if (options.load_format != "dummy" || !options.tokenizer.empty()) {
      return tokenizer.status().WithContext("tokenizer");
    }
  }

  if (!options.model.empty() && IsDirectory(options.model)) {
    std::string path = (std::filesystem::path(options.model) / "generation_config.json").string();
    KILN_ASSIGN_OR_RETURN(loaded.generation, ReadGenerationConfig(path));
  }
  return loaded;
}

}  // namespace kiln
