// Tokenization endpoints.
#include "server/tokenize_endpoint.h"

#include <fmt/format.h>

#include "format/model_config.h"
#include "server/completion_request.h"
#include "server/http_reply.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace kiln::server {
namespace {

// The loaded engine's tokenizer, or the error to answer with.
const Tokenizer* TokenizerOrReply(ServerState& state, httplib::Response& res) {
  EngineLoop* loop = state.engine_loop();
  if (loop == nullptr) {
    ReplyError(res, ApiError{503, "the model is still loading", "server_error", "", ""});
    return nullptr;
  }
  if (loop->engine().tokenizer() == nullptr) {
    ReplyError(res, BadRequest("", "this model has no tokenizer"));
    return nullptr;
  }
  return loop->engine().tokenizer();
}

// Checks "model" as the generation endpoints do.
bool ModelMatches(ServerState& state, JsonFields& f, httplib::Response& res) {
  std::optional<std::string> model;
  if (!f.String("model", &model)) {
    ReplyError(res, f.error());
    return false;
  }
  if (model && *model != state.model_name()) {
    ReplyError(res, ApiError{404, fmt::format("The model `{}` does not exist.", *model), "invalid_request_error",
                             "model", "model_not_found"});
    return false;
  }
  return true;
}

}  // namespace

void ServeTokenize(ServerState& state, const std::string& body, httplib::Response& res) {
  const Tokenizer* tokenizer = TokenizerOrReply(state, res);
  if (tokenizer == nullptr) return;
  nlohmann::json json;
  if (ApiStatus e = ParseJsonObject(body, &json)) return ReplyError(res, *e);
  JsonFields f(json);
  if (!ModelMatches(state, f, res)) return;
  std::optional<bool> add_special;
  if (!f.Bool("add_special_tokens", &add_special)) return ReplyError(res, f.error());

  std::string text;
  bool add_special_tokens = add_special.value_or(true);
  if (f.Has("messages")) {
    // Reuse the chat endpoint's reading of messages.
    CompletionRequest chat;
    if (ApiStatus e = ParseChatRequest(json, &chat)) return ReplyError(res, *e);
    Expected<std::string> rendered = RenderChatPrompt(*tokenizer, chat.messages);
    if (!rendered.ok()) return ReplyError(res, ErrorFromStatus(rendered.status().WithContext("messages"), "messages"));
    text = std::move(rendered).value();
    add_special_tokens = add_special.value_or(false);  // the template places them
  } else {
    std::optional<std::string> prompt;
    if (!f.String("prompt", &prompt)) return ReplyError(res, f.error());
    if (!prompt) return ReplyError(res, BadRequest("prompt", "prompt: is required (or give messages)"));
    text = std::move(*prompt);
  }
  std::vector<int32_t> ids = tokenizer->Encode(text, add_special_tokens);
  nlohmann::ordered_json answer;
  answer["tokens"] = ids;
  answer["count"] = ids.size();
  answer["max_model_len"] = state.engine_loop()->engine().max_model_len();
  ReplyJson(res, 200, answer);
}

void ServeDetokenize(ServerState& state, const std::string& body, httplib::Response& res) {
  const Tokenizer* tokenizer = TokenizerOrReply(state, res);
  if (tokenizer == nullptr) return;
  nlohmann::json json;
  if (ApiStatus e = ParseJsonObject(body, &json)) return ReplyError(res, *e);
  JsonFields f(json);
  if (!ModelMatches(state, f, res)) return;
  const int64_t vocab = state.engine_loop()->engine().model_config().vocab_size;
  std::optional<std::vector<int64_t>> tokens;
  if (!f.IntegerList("tokens", 0, vocab - 1, SIZE_MAX, &tokens)) return ReplyError(res, f.error());
  if (!tokens) return ReplyError(res, BadRequest("tokens", "tokens: is required"));
  std::vector<int32_t> ids(tokens->begin(), tokens->end());
  nlohmann::ordered_json answer;
  answer["prompt"] = tokenizer->Decode(ids);
  ReplyJson(res, 200, answer);
}

}  // namespace kiln::server
