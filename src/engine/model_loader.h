// Opens what an engine serves: the weights (a Hugging Face folder, a .gguf
// file, or generated weights of a preset's shapes), the tokenizer and the
// generation config.
#pragma once

#include <future>
#include <memory>

#include "core/status.h"
#include "engine/engine_options.h"
#include "engine/generation_config.h"

namespace kiln {

class PagePrefault;

class Tokenizer;
class WeightStore;

struct LoadedModel {
  std::shared_ptr<const WeightStore> weights;
  // Null only for generated weights without a tokenizer (token ids in and
  // out), or while pending_tokenizer is set.
  std::shared_ptr<const Tokenizer> tokenizer;
  GenerationConfig generation;
  // With TokenizerLoad::kInBackground, the tokenizer while it is being
  // built on a thread of its own; FinishTokenizer waits for it.
  std::shared_future<Expected<std::shared_ptr<const Tokenizer>>> pending_tokenizer;
  // A compiled artifact's packed weights, whose page tables a caller with
  // time to wait (for pending_tokenizer) fills a step at a time before the
  // first forward pass; null for other models.
  std::shared_ptr<PagePrefault> prefault;

  // Sets `tokenizer` from pending_tokenizer, if any (an error if building
  // it failed); a no-op otherwise. While it waits, it fills the prefault's
  // page tables.
  Status FinishTokenizer();
};

// When LoadModel builds the tokenizer. In the background, it is built while
// the caller goes on (compiling the model, allocating the KV cache: the
// tokenizer of a compiled artifact takes as long as those), and the caller
// must call FinishTokenizer before using it. Only artifacts use a thread.
enum class TokenizerLoad { kNow, kInBackground };

// Loads options.model (a compiled .kiln artifact through LoadArtifact; or,
// with load_format "dummy", generates weights of options.preset's shapes or
// of the model folder's config.json) and its tokenizer (options.tokenizer
// when set). With tensor_parallel_size above 1 the weights are this rank's
// shard (WeightStore::TensorParallelShard; the group must be set). Errors
// name the path.
Expected<LoadedModel> LoadModel(const EngineOptions& options, TokenizerLoad when = TokenizerLoad::kNow);

}  // namespace kiln
