// Loading a draft model and checking that it shares the target's tokens.
#include "engine/draft_model.h"

#include "format/model_config.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

Status CheckSameVocabulary(const LoadedModel& target, std::string_view target_name, const LoadedModel& draft,
                           std::string_view draft_name) {
  const Tokenizer* t = target.tokenizer.get();
  const Tokenizer* d = draft.tokenizer.get();
  if ((t == nullptr) != (d == nullptr)) {
    return InvalidArgument(
        "draft model {} {} a tokenizer and model {} {}: their vocabularies cannot be compared", draft_name,
        d ? "has" : "has no", target_name, t ? "has" : "has none");
  }
  if (t == nullptr) {
    const int64_t tv = target.weights->config().vocab_size;
    const int64_t dv = draft.weights->config().vocab_size;
    if (tv != dv) {
      return InvalidArgument("draft model {} has a vocabulary of {} tokens, model {} one of {}", draft_name,
                             dv, target_name, tv);
    }
    return Status::Ok();
  }
  if (t->vocab_size() != d->vocab_size()) {
    return InvalidArgument(
        "draft model {}'s tokenizer has {} tokens, model {}'s has {}: they must share a vocabulary",
        draft_name, d->vocab_size(), target_name, t->vocab_size());
  }
  for (int32_t id = 0; id < t->vocab_size(); ++id) {
    if (t->TokenPiece(id) != d->TokenPiece(id)) {
      return InvalidArgument(
          "draft model {}'s vocabulary differs from model {}'s: token {} is '{}' in the draft and '{}' in "
          "the model; they must "
          "share a tokenizer",
          draft_name, target_name, id, d->TokenPiece(id), t->TokenPiece(id));
    }
  }
  return Status::Ok();
}

Expected<LoadedModel> LoadDraftModel(const EngineOptions& options, const LoadedModel& target) {
  if (options.draft_model == "self") {
    LoadedModel draft = target;  // the tokenizer and generation config are shared
    if (!options.draft_dtype.empty()) {
      KILN_ASSIGN_OR_RETURN(DType dtype, ParseDraftDType(options.draft_dtype));
      auto weights = WeightStore::Requantized(*target.weights, dtype);
      if (!weights.ok()) return weights.status().WithContext("draft model self");
      draft.weights = std::shared_ptr<const WeightStore>(std::move(weights).value());
    }
    return draft;
  }
  EngineOptions draft_options;
  draft_options.model = options.draft_model;
  auto draft = LoadModel(draft_options);
  if (!draft.ok()) return draft.status().WithContext(fmt::format("draft model {}", options.draft_model));
  const std::string target_name = options.model.empty() ? target.weights->path() : options.model;
  KILN_RETURN_IF_ERROR(CheckSameVocabulary(target, target_name, *draft, options.draft_model));
  return draft;
}

}  // namespace kiln
