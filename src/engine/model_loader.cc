// Loading weights, tokenizer and generation config for an engine.
#include "engine/model_loader.h"

#include <filesystem>

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

Expected<LoadedModel> LoadModel(const EngineOptions& options) {
  KILN_RETURN_IF_ERROR(options.Validate());
  if (!options.model.empty() && IsArtifactFile(options.model)) return LoadArtifact(options);
  LoadedModel loaded;
  KILN_ASSIGN_OR_RETURN(loaded.weights, LoadWeights(options));

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
