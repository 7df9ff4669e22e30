// Opens what an engine serves: the weights (a Hugging Face folder, a .gguf
// file, or generated weights of a preset's shapes), the tokenizer and the
// generation config.
#pragma once

#include <memory>

#include "core/status.h"
#include "engine/engine_options.h"
#include "engine/generation_config.h"

namespace kiln {

class Tokenizer;
class WeightStore;

struct LoadedModel {
  std::shared_ptr<const WeightStore> weights;
  // Null only for generated weights without a tokenizer (token ids in and out).
  std::shared_ptr<const Tokenizer> tokenizer;
  GenerationConfig generation;
};

// Loads options.model (a compiled .kiln artifact through LoadArtifact; or,
// with load_format "dummy", generates weights of options.preset's shapes or
// of the model folder's config.json) and its tokenizer (options.tokenizer
// when set). With tensor_parallel_size above 1 the weights are this rank's
// shard (WeightStore::TensorParallelShard; the group must be set). Errors
// name the path.
Expected<LoadedModel> LoadModel(const EngineOptions& options);

}  // namespace kiln
