// The C API's models: loading, facts, tokenizing and chat prompts.
#include <limits>
#include <span>

#include <nlohmann/json.hpp>

#include "capi/c_boundary.h"
#include "capi/handles.h"
#include "capi/option_conversion.h"
#include "engine/model_artifact.h"
#include "format/artifact_file.h"
#include "format/weight_store.h"
#include "kiln/kiln.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

using kiln::Expected;
using kiln::InvalidArgument;
using kiln::OutOfRange;
using kiln::Status;
using kiln::capi::Guard;

namespace {

// Byte strings longer than this are refused rather than tokenized.
constexpr size_t kMaxTextBytes = size_t{1} << 30;

Expected<const kiln::Tokenizer*> TokenizerOf(const kiln_model* model) {
  if (model == nullptr) return InvalidArgument("model is NULL");
  if (model->model.tokenizer == nullptr) {
    return InvalidArgument("the model has no tokenizer (load it with options.tokenizer)");
  }
  return model->model.tokenizer.get();
}

const kiln::ModelConfig* ConfigOf(const kiln_model* model) {
  return model != nullptr && model->model.weights != nullptr ? &model->model.weights->config() : nullptr;
}

int32_t ClampToInt32(int64_t value) {
  return static_cast<int32_t>(std::min<int64_t>(value, std::numeric_limits<int32_t>::max()));
}

}  // namespace

extern "C" {

void kiln_model_options_init(kiln_model_options* options, size_t struct_size) {
  kiln::capi::WriteOptions(options, struct_size, kiln::capi::DefaultCModelOptions());
}

kiln_status kiln_model_load(const char* path, const kiln_model_options* options, kiln_model** model) {
  return Guard("kiln_model_load", [&]() -> Status {
    if (model == nullptr) return InvalidArgument("model (the output) is NULL");
    KILN_ASSIGN_OR_RETURN(kiln::EngineOptions o, kiln::capi::FromCModelOptions(path, options));
    nlohmann::json compiled_with;
    if (kiln::IsArtifactFile(o.model)) {
      // A compiled artifact: its compile options, an option set otherwise an error.
      KILN_ASSIGN_OR_RETURN(kiln::OpenedArtifact artifact, kiln::OpenArtifact(o.model, o.recompile_if_stale));
      KILN_RETURN_IF_ERROR(kiln::ApplyArtifactOptions(artifact.metadata, nullptr, &o));
      compiled_with = {{"options", artifact.metadata.at("options")}};
      o.opened_artifact = std::make_shared<const kiln::OpenedArtifact>(std::move(artifact));
    }
    KILN_ASSIGN_OR_RETURN(kiln::LoadedModel loaded, kiln::LoadModel(o));
    *model = new kiln_model{std::move(loaded), o, std::move(compiled_with)};
    return Status::Ok();
  });
}

void kiln_model_destroy(kiln_model* model) {
  delete model;
}

int32_t kiln_model_vocab_size(const kiln_model* model) {
  const kiln::ModelConfig* config = ConfigOf(model);
  return config != nullptr ? ClampToInt32(config->vocab_size) : 0;
}

int32_t kiln_model_max_context(const kiln_model* model) {
  const kiln::ModelConfig* config = ConfigOf(model);
  return config != nullptr ? ClampToInt32(config->max_position_embeddings) : 0;
}

int32_t kiln_model_bos_id(const kiln_model* model) {
  return model != nullptr && model->model.tokenizer ? model->model.tokenizer->bos_id() : -1;
}

int32_t kiln_model_eos_id(const kiln_model* model) {
  return model != nullptr && model->model.tokenizer ? model->model.tokenizer->eos_id() : -1;
}

int kiln_model_has_tokenizer(const kiln_model* model) {
  return model != nullptr && model->model.tokenizer != nullptr ? 1 : 0;
}

kiln_status kiln_tokenize(const kiln_model* model, const char* text, size_t text_len, int add_special,
                          int parse_special, int32_t* ids, size_t capacity, size_t* num_ids) {
  return Guard("kiln_tokenize", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(const kiln::Tokenizer* tokenizer, TokenizerOf(model));
    if (text == nullptr && text_len > 0) return InvalidArgument("text is NULL but text_len is {}", text_len);
    if (text_len > kMaxTextBytes)
      return InvalidArgument("text_len {} beyond {} bytes", text_len, kMaxTextBytes);
    if (num_ids == nullptr) return InvalidArgument("num_ids (the output) is NULL");
    if (ids == nullptr && capacity > 0) return InvalidArgument("ids is NULL but capacity is {}", capacity);
    std::vector<int32_t> encoded = tokenizer->Encode(std::string_view(text != nullptr ? text : "", text_len),
                                                     add_special != 0, parse_special != 0);
    *num_ids = encoded.size();
    if (ids == nullptr) return Status::Ok();  // a size query
    if (encoded.size() > capacity) {
      return OutOfRange("the text is {} ids; ids holds {}", encoded.size(), capacity);
    }
    std::copy(encoded.begin(), encoded.end(), ids);
    return Status::Ok();
  });
}

kiln_status kiln_detokenize(const kiln_model* model, const int32_t* ids, size_t num_ids, int skip_special,
                            char** text) {
  return Guard("kiln_detokenize", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(const kiln::Tokenizer* tokenizer, TokenizerOf(model));
    if (ids == nullptr && num_ids > 0) return InvalidArgument("ids is NULL but num_ids is {}", num_ids);
    if (text == nullptr) return InvalidArgument("text (the output) is NULL");
    const int32_t vocab = tokenizer->vocab_size();
    for (size_t i = 0; i < num_ids; ++i) {
      if (ids[i] < 0 || ids[i] >= vocab)
        return OutOfRange("ids[{}] is {}, outside the vocabulary of {}", i, ids[i], vocab);
    }
    std::string decoded = tokenizer->Decode(std::span<const int32_t>(ids, num_ids), skip_special != 0);
    *text = kiln::capi::NewCString(decoded);
    return Status::Ok();
  });
}

kiln_status kiln_chat_render(const kiln_model* model, const kiln_chat_message* messages, size_t num_messages,
                             char** prompt) {
  return Guard("kiln_chat_render", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(const kiln::Tokenizer* tokenizer, TokenizerOf(model));
    if (messages == nullptr && num_messages > 0) {
      return InvalidArgument("messages is NULL but num_messages is {}", num_messages);
    }
    if (prompt == nullptr) return InvalidArgument("prompt (the output) is NULL");
    nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
    for (size_t i = 0; i < num_messages; ++i) {
      if (messages[i].role == nullptr) return InvalidArgument("messages[{}].role is NULL", i);
      if (messages[i].content == nullptr) return InvalidArgument("messages[{}].content is NULL", i);
      conversation.push_back({{"role", messages[i].role}, {"content", messages[i].content}});
    }
    KILN_ASSIGN_OR_RETURN(std::string rendered, kiln::RenderChatPrompt(*tokenizer, conversation));
    *prompt = kiln::capi::NewCString(rendered);
    return Status::Ok();
  });
}

kiln_status kiln_chat_render_json(const kiln_model* model, const char* messages_json, char** prompt) {
  return Guard("kiln_chat_render_json", [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(const kiln::Tokenizer* tokenizer, TokenizerOf(model));
    if (messages_json == nullptr) return InvalidArgument("messages_json is NULL");
    if (prompt == nullptr) return InvalidArgument("prompt (the output) is NULL");
    nlohmann::ordered_json conversation =
        nlohmann::ordered_json::parse(messages_json, nullptr, /*allow_exceptions=*/false);
    if (conversation.is_discarded()) return InvalidArgument("messages_json is not valid JSON");
    if (!conversation.is_array())
      return InvalidArgument("messages_json must be a JSON array of message objects");
    for (size_t i = 0; i < conversation.size(); ++i) {
      if (!conversation[i].is_object()) return InvalidArgument("messages_json[{}] is not an object", i);
    }
    KILN_ASSIGN_OR_RETURN(std::string rendered, kiln::RenderChatPrompt(*tokenizer, conversation));
    *prompt = kiln::capi::NewCString(rendered);
    return Status::Ok();
  });
}

void kiln_model_sampling_params_init(const kiln_model* model, kiln_sampling_params* params,
                                     size_t struct_size) {
  kiln::SamplingParams p =
      model != nullptr ? model->model.generation.DefaultSamplingParams() : kiln::SamplingParams{};
  kiln::capi::WriteOptions(params, struct_size, kiln::capi::ToCSamplingParams(p));
}

}  // extern "C"
