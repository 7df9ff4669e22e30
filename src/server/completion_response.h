// The OpenAI response shapes of both generation endpoints: the whole
// chat.completion / text_completion object, and the chat.completion.chunk /
// text_completion chunks of a stream, with usage and log-probabilities.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/chat_output_parser.h"
#include "server/completion_request.h"

namespace kiln {
class Tokenizer;
}

namespace kiln::server {

// What one choice has produced so far.
struct ChoiceOutput {
  std::string text;  // echo included for completions
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;                         // per token, when asked for
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token, when asked for
  FinishReason finish_reason = FinishReason::kNone;
  // Chat replies read for reasoning and tool calls: the message is made of
  // these instead of `text`.
  std::optional<ParsedChatOutput> parsed;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens found in the prefix cache
};

// Log-probabilities of some of a choice's tokens, for a response or a chunk.
struct TokenLogprobs {
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
  // Completions only: where the first of these tokens starts in the text.
  size_t text_offset = 0;
};

// Builds the response objects of one request. REQUIRES: `tokenizer`, when
// not null, outlives the formatter.
class ResponseFormatter {
 public:
  // `id` is "chatcmpl-..." or "cmpl-..."; `created` is in Unix seconds.
  // With `logprobs`, choices and chunks carry log-probabilities.
  ResponseFormatter(Endpoint endpoint, std::string id, int64_t created, std::string model,
                    const Tokenizer* tokenizer, bool logprobs);

  // The non-streaming response: choices in order, then usage.
  nlohmann::ordered_json Complete(const std::vector<ChoiceOutput>& choices, const Usage& usage) const;

  // A stream's first chunk for a chat choice: the assistant role with
  // empty content. Completions have none.
  nlohmann::ordered_json RoleChunk(int index) const;
  // A chunk carrying new text (and the log-probabilities of its tokens).
  nlohmann::ordered_json TextChunk(int index, const std::string& text, const TokenLogprobs* logprobs) const;
  // A chat chunk with the given delta ({"content"}, {"reasoning_content"} or
  // {"tool_calls": [...]}) and the log-probabilities of its tokens.
  nlohmann::ordered_json DeltaChunk(int index, nlohmann::ordered_json delta, const TokenLogprobs* logprobs) const;
  // The chat chunks of parsed reply pieces: runs of text in one chunk each,
  // a call's first chunk with its index, id, type, name and arguments "",
  // then its argument fragments. `logprobs` goes with the first chunk (an
  // empty delta when there is none).
  std::vector<nlohmann::ordered_json> DeltaChunks(int index, const std::vector<ChatDelta>& deltas,
                                                  const TokenLogprobs* logprobs) const;
  // The chunk that ends a choice: an empty delta (chat) or text (completions)
  // and the finish reason; "tool_calls" instead of "stop" when the chat
  // reply made calls.
  nlohmann::ordered_json FinishChunk(int index, FinishReason reason, bool made_tool_calls = false) const;
  // The last chunk when stream_options.include_usage: no choices, the usage.
  nlohmann::ordered_json UsageChunk(const Usage& usage) const;

  // Chunks before the usage chunk carry "usage": null when it is asked for,
  // as OpenAI's do.
  void set_usage_null_in_chunks(bool on) { usage_null_in_chunks_ = on; }

  const std::string& id() const { return id_; }
  Endpoint endpoint() const { return endpoint_; }
  bool logprobs() const { return logprobs_; }

  // The text of one token as the log-probabilities show it.
  std::string TokenText(int32_t id) const;

 private:
  nlohmann::ordered_json Header(bool chunk) const;
  nlohmann::ordered_json LogprobsJson(const TokenLogprobs& logprobs) const;
  nlohmann::ordered_json ChunkWith(nlohmann::ordered_json choice) const;

  Endpoint endpoint_;
  std::string id_;
  int64_t created_;
  std::string model_;
  const Tokenizer* tokenizer_;
  bool logprobs_;
  bool usage_null_in_chunks_ = false;
};

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}.
nlohmann::ordered_json UsageJson(const Usage& usage);

// OpenAI's finish_reason: "stop", "length", or null while running;
// "tool_calls" for a stop after the reply made calls.
nlohmann::ordered_json FinishReasonJson(FinishReason reason, bool made_tool_calls = false);

}  // namespace kiln::server
