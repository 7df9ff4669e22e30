// OpenAI response objects and stream chunks.
#include "server/completion_response.h"

#include <fmt/format.h>

#include "tokenizer/tokenizer.h"

namespace kiln::server {
namespace {

using Json = nlohmann::ordered_json;

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (char c : text) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

}  // namespace

Json UsageJson(const Usage& usage) {
  Json j;
  j["prompt_tokens"] = usage.prompt_tokens;
  j["completion_tokens"] = usage.completion_tokens;
  j["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  j["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens}};
  return j;
}

Json FinishReasonJson(FinishReason reason, bool made_tool_calls) {
  if (reason == FinishReason::kNone) return Json();
  if (made_tool_calls && reason == FinishReason::kStop) return "tool_calls";
  return FinishReasonName(reason);
}

ResponseFormatter::ResponseFormatter(Endpoint endpoint, std::string id, int64_t created, std::string model,
                                     const Tokenizer* tokenizer, bool logprobs)
    : endpoint_(endpoint),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      tokenizer_(tokenizer),
      logprobs_(logprobs) {}

std::string ResponseFormatter::TokenText(int32_t id) const {
  if (tokenizer_ == nullptr) return fmt::format("token_id:{}", id);
  const int32_t ids[] = {id};
  return tokenizer_->Decode(ids, /*skip_special=*/false);
}

Json ResponseFormatter::Header(bool chunk) const {
  Json j;
  j["id"] = id_;
  if (endpoint_ == Endpoint::kChat) {
    j["object"] = chunk ? "chat.completion.chunk" : "chat.completion";
  } else {
    j["object"] = "text_completion";
  }
  j["created"] = created_;
  j["model"] = model_;
  j["system_fingerprint"] = "kiln-" KILN_VERSION;
  return j;
}

Json ResponseFormatter::LogprobsJson(const TokenLogprobs& lp) const {
  if (endpoint_ == Endpoint::kChat) {
    Json content = Json::array();
    for (size_t i = 0; i < lp.token_ids.size(); ++i) {
      std::string token = TokenText(lp.token_ids[i]);
      Json item;
      item["token"] = token;
      item["logprob"] = lp.logprobs[i];
      item["bytes"] = Bytes(token);
      Json top = Json::array();
      if (i < lp.top.size()) {
        for (const TokenLogprob& alt : lp.top[i]) {
          std::string alt_token = TokenText(alt.token);
          top.push_back({{"token", alt_token}, {"logprob", alt.logprob}, {"bytes", Bytes(alt_token)}});
        }
      }
      item["top_logprobs"] = std::move(top);
      content.push_back(std::move(item));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  // The legacy form: parallel lists.
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  size_t offset = lp.text_offset;
  bool any_top = false;
  for (size_t i = 0; i < lp.token_ids.size(); ++i) {
    std::string token = TokenText(lp.token_ids[i]);
    tokens.push_back(token);
    token_logprobs.push_back(lp.logprobs[i]);
    offsets.push_back(offset);
    offset += token.size();
    Json alternatives = Json::object();
    if (i < lp.top.size()) {
      for (const TokenLogprob& alt : lp.top[i]) alternatives[TokenText(alt.token)] = alt.logprob;
      any_top = any_top || !lp.top[i].empty();
    }
    top.push_back(std::move(alternatives));
  }
  Json j;
  j["tokens"] = std::move(tokens);
  j["token_logprobs"] = std::move(token_logprobs);
  j["top_logprobs"] = any_top ? std::move(top) : Json();
  j["text_offset"] = std::move(offsets);
  return j;
}

Json ResponseFormatter::Complete(const std::vector<ChoiceOutput>& choices, const Usage& usage) const {
  Json j = Header(/*chunk=*/false);
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& c = choices[i];
    Json choice;
    choice["index"] = i;
    bool made_tool_calls = false;
    if (endpoint_ == Endpoint::kChat && c.parsed) {
      const ParsedChatOutput& p = *c.parsed;
      made_tool_calls = !p.tool_calls.empty();
      Json message = {{"role", "assistant"}};
      message["content"] = p.content.empty() && made_tool_calls ? Json() : Json(p.content);
      if (!p.reasoning.empty()) message["reasoning_content"] = p.reasoning;
      if (made_tool_calls) message["tool_calls"] = p.tool_calls;
      choice["message"] = std::move(message);
    } else if (endpoint_ == Endpoint::kChat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    if (logprobs_) {
      TokenLogprobs lp{c.token_ids, c.logprobs, c.top_logprobs, 0};
      choice["logprobs"] = LogprobsJson(lp);
    } else {
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = FinishReasonJson(c.finish_reason, made_tool_calls);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = UsageJson(usage);
  return j;
}

Json ResponseFormatter::ChunkWith(Json choice) const {
  Json j = Header(/*chunk=*/true);
  j["choices"] = Json::array({std::move(choice)});
  if (usage_null_in_chunks_) j["usage"] = nullptr;
  return j;
}

Json ResponseFormatter::RoleChunk(int index) const {
  Json choice;
  choice["index"] = index;
  choice["delta"] = {{"role", "assistant"}, {"content", ""}};
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  return ChunkWith(std::move(choice));
}

Json ResponseFormatter::TextChunk(int index, const std::string& text, const TokenLogprobs* logprobs) const {
  Json choice;
  choice["index"] = index;
  if (endpoint_ == Endpoint::kChat) {
    choice["delta"] = {{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs_ && logprobs != nullptr ? LogprobsJson(*logprobs) : Json();
  choice["finish_reason"] = nullptr;
  return ChunkWith(std::move(choice));
}

Json ResponseFormatter::DeltaChunk(int index, Json delta, const TokenLogprobs* logprobs) const {
  Json choice;
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = logprobs_ && logprobs != nullptr ? LogprobsJson(*logprobs) : Json();
  choice["finish_reason"] = nullptr;
  return ChunkWith(std::move(choice));
}

std::vector<Json> ResponseFormatter::DeltaChunks(int index, const std::vector<ChatDelta>& deltas,
                                                 const TokenLogprobs* logprobs) const {
  std::vector<Json> chunks;
  auto add = [&](Json delta) {
    chunks.push_back(DeltaChunk(index, std::move(delta), chunks.empty() ? logprobs : nullptr));
  };
  for (size_t i = 0; i < deltas.size(); ++i) {
    const ChatDelta& d = deltas[i];
    if (d.kind == ChatDelta::Kind::kContent || d.kind == ChatDelta::Kind::kReasoning) {
      std::string text = d.text;
      while (i + 1 < deltas.size() && deltas[i + 1].kind == d.kind) text += deltas[++i].text;
      add({{d.kind == ChatDelta::Kind::kContent ? "content" : "reasoning_content", std::move(text)}});
    } else if (d.kind == ChatDelta::Kind::kToolCallStart) {
      Json call = {{"index", d.index},
                   {"id", d.id},
                   {"type", "function"},
                   {"function", {{"name", d.text}, {"arguments", ""}}}};
      add({{"tool_calls", Json::array({std::move(call)})}});
    } else {
      std::string text = d.text;
      while (i + 1 < deltas.size() && deltas[i + 1].kind == d.kind && deltas[i + 1].index == d.index) {
        text += deltas[++i].text;
      }
      Json call = {{"index", d.index}, {"function", {{"arguments", std::move(text)}}}};
      add({{"tool_calls", Json::array({std::move(call)})}});
    }
  }
  if (chunks.empty() && logprobs_ && logprobs != nullptr) add(Json::object());
  return chunks;
}

Json ResponseFormatter::FinishChunk(int index, FinishReason reason, bool made_tool_calls) const {
  Json choice;
  choice["index"] = index;
  if (endpoint_ == Endpoint::kChat) {
    choice["delta"] = Json::object();
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishReasonJson(reason, made_tool_calls);
  return ChunkWith(std::move(choice));
}

Json ResponseFormatter::UsageChunk(const Usage& usage) const {
  Json j = Header(/*chunk=*/true);
  j["choices"] = Json::array();
  j["usage"] = UsageJson(usage);
  return j;
}

}  // namespace kiln::server
