// The draft model of speculative decoding: a second, cheaper model that
// speaks the target's vocabulary, so that its tokens mean the same to both.
#pragma once

#include <string_view>

#include "core/status.h"
#include "engine/engine_options.h"
#include "engine/model_loader.h"

namespace kiln {

// Loads options.draft_model for the engine's model `target`: a Hugging Face
// folder or .gguf file with its own tokenizer, checked against the target's
// (CheckSameVocabulary), or "self": the target's weights converted to
// options.draft_dtype (sharing the tokenizer and nothing else), or shared as
// they are when no dtype is given. Errors name the draft model.
// REQUIRES: options.Validate() is ok and spec_method is "draft".
Expected<LoadedModel> LoadDraftModel(const EngineOptions& options, const LoadedModel& target);

// Ok when token id i is the same text for both models for every id: the
// tokenizers have the same vocabulary (the same size and pieces), or, for
// models without tokenizers, the configs the same vocabulary size. The
// error names both models and the first difference.
Status CheckSameVocabulary(const LoadedModel& target, std::string_view target_name, const LoadedModel& draft,
                           std::string_view draft_name);

}  // namespace kiln
