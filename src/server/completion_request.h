// The body of POST /v1/chat/completions and POST /v1/completions, read and
// checked: every field kiln honours, with a 400 naming the first field of
// the wrong type or out of range. Unknown fields are ignored, as OpenAI's
// API does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "server/json_fields.h"

namespace kiln::server {

enum class Endpoint { kChat, kCompletion };

// One prompt of a completions request: text, or token ids.
struct PromptInput {
  std::string text;
  std::vector<int32_t> ids;
};

// Choices one request may ask for in all (n times the prompts).
inline constexpr int kMaxChoicesPerRequest = 128;

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;  // empty when not given

  // Chat: [{"role", "content"}] with content as one string and roles
  // system, user, assistant or tool ("developer" is read as system), plus
  // the tool parts of messages (see tool_request.h).
  nlohmann::ordered_json messages;
  // Completions: one or more prompts.
  std::vector<PromptInput> prompts;

  // Sampling, stopping and log-probabilities (params.logprobs for the
  // chosen tokens, params.top_logprobs alternatives). params.max_tokens is
  // meaningful only when max_tokens_given; otherwise the server picks it
  // from the context left.
  SamplingParams params;
  bool max_tokens_given = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt is repeated before the text
  // The body field params' grammar, json_schema or json_object came from
  // (response_format, grammar, json_schema; "" when none), named in 400s
  // about the constraint (response_format.h).
  std::string constraint_field;
};

// Reads a chat completions body into `out`, whose params hold the defaults
// of the sampling fields the body does not give (the model's generation
// config); everything else in `out` is replaced.
ApiStatus ParseChatRequest(const nlohmann::json& body, CompletionRequest* out);
// Reads a (legacy) completions body, as ParseChatRequest does.
ApiStatus ParseCompletionRequest(const nlohmann::json& body, CompletionRequest* out);

}  // namespace kiln::server
