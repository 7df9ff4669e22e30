// Reading chat and completions bodies into CompletionRequest.
#include "server/completion_request.h"

#include <limits>

#include <fmt/format.h>

#include "server/response_format.h"
#include "server/tool_request.h"

namespace kiln::server {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopTokenIds = 256;
constexpr size_t kMaxPrompts = kMaxChoicesPerRequest;

// The sampling fields both endpoints share. `logprobs` differs between them
// and is read by the callers.
bool ReadSampling(JsonFields& f, CompletionRequest* out) {
  SamplingParams& p = out->params;
  std::optional<std::string> model;
  if (!f.String("model", &model)) return false;
  out->model = model.value_or("");

  // max_completion_tokens is the newer name; it wins when both are given.
  std::optional<int64_t> max_tokens, max_completion_tokens;
  if (!f.Integer("max_tokens", 1, kInt32Max, &max_tokens)) return false;
  if (!f.Integer("max_completion_tokens", 1, kInt32Max, &max_completion_tokens)) return false;
  if (max_completion_tokens) max_tokens = max_completion_tokens;
  if (max_tokens) {
    p.max_tokens = static_cast<int32_t>(*max_tokens);
    out->max_tokens_given = true;
  }

  std::optional<double> number;
  if (!f.Number("temperature", 0, 2, &number)) return false;
  if (number) p.temperature = *number;
  number.reset();
  if (!f.Number("top_p", 0, 1, &number)) return false;
  if (number) {
    if (*number <= 0) return f.Fail("top_p", fmt::format("must be in (0, 1], got {}", *number));
    p.top_p = *number;
  }
  number.reset();
  if (!f.Number("min_p", 0, 1, &number)) return false;
  if (number) p.min_p = *number;
  number.reset();
  if (!f.Number("presence_penalty", -2, 2, &number)) return false;
  if (number) p.presence_penalty = *number;
  number.reset();
  if (!f.Number("frequency_penalty", -2, 2, &number)) return false;
  if (number) p.frequency_penalty = *number;
  number.reset();
  if (!f.Number("repetition_penalty", 0, 100, &number)) return false;
  if (number) {
    if (*number <= 0) return f.Fail("repetition_penalty", fmt::format("must be > 0, got {}", *number));
    p.repetition_penalty = *number;
  }

  std::optional<int64_t> integer;
  if (!f.Integer("top_k", -1, kInt32Max, &integer)) return false;
  if (integer) p.top_k = *integer < 0 ? 0 : static_cast<int32_t>(*integer);  // -1 means off, as in vLLM
  integer.reset();
  if (!f.Integer("min_tokens", 0, kInt32Max, &integer)) return false;
  if (integer) p.min_tokens = static_cast<int32_t>(*integer);
  integer.reset();
  if (!f.Integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &integer)) {
    return false;
  }
  if (integer) p.seed = static_cast<uint64_t>(*integer);
  integer.reset();
  if (!f.Integer("n", 1, kMaxChoicesPerRequest, &integer)) return false;
  if (integer) out->n = static_cast<int>(*integer);

  std::optional<std::vector<std::string>> stop;
  if (!f.StringOrList("stop", kMaxStopStrings, &stop)) return false;
  if (stop) p.stop = std::move(*stop);
  std::optional<std::vector<int64_t>> stop_ids;
  if (!f.IntegerList("stop_token_ids", 0, kInt32Max, kMaxStopTokenIds, &stop_ids)) return false;
  if (stop_ids) p.stop_token_ids.assign(stop_ids->begin(), stop_ids->end());

  std::optional<bool> flag;
  if (!f.Bool("ignore_eos", &flag)) return false;
  if (flag) p.ignore_eos = *flag;
  flag.reset();
  if (!f.Bool("skip_special_tokens", &flag)) return false;
  if (flag) p.skip_special_tokens = *flag;
  flag.reset();
  if (!f.Bool("stream", &flag)) return false;
  out->stream = flag.value_or(false);

  const nlohmann::json& options = f.Get("stream_options");
  if (!options.is_null()) {
    if (!options.is_object()) {
      return f.Fail("stream_options", fmt::format("expected an object, got {}", JsonTypeName(options)));
    }
    if (!out->stream) return f.Fail("stream_options", "is allowed only when stream is true");
    auto usage = options.find("include_usage");
    if (usage != options.end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        return f.Fail("stream_options.include_usage",
                      fmt::format("expected a boolean, got {}", JsonTypeName(*usage)));
      }
      out->include_usage = usage->get<bool>();
    }
  }

  // Fields kiln knows but cannot honour: refused rather than ignored, so a
  // client never gets an answer that silently disregards them.
  const nlohmann::json& bias = f.Get("logit_bias");
  if (!bias.is_null() && !(bias.is_object() && bias.empty())) return f.Fail("logit_bias", "is not supported");
  return ReadStructuredOutput(f, &p, &out->constraint_field);
}

// The chat message list, each content reduced to one string.
bool ReadMessages(JsonFields& f, nlohmann::ordered_json* out) {
  const nlohmann::json& messages = f.Get("messages");
  if (messages.is_null()) return f.Fail("messages", "is required");
  if (!messages.is_array()) {
    return f.Fail("messages", fmt::format("expected a list of messages, got {}", JsonTypeName(messages)));
  }
  if (messages.empty()) return f.Fail("messages", "must not be empty");
  *out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& m = messages[i];
    std::string path = fmt::format("messages[{}]", i);
    if (!m.is_object()) return f.Fail(path, fmt::format("expected an object, got {}", JsonTypeName(m)));
    JsonFields mf(m);
    const nlohmann::json& role_value = mf.Get("role");
    if (role_value.is_null()) return f.Fail(path + ".role", "is required");
    if (!role_value.is_string()) {
      return f.Fail(path + ".role", fmt::format("expected a string, got {}", JsonTypeName(role_value)));
    }
    std::string role = role_value.get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return f.Fail(path + ".role",
                    fmt::format("must be system, user, assistant or tool, got {}", role_value.dump()));
    }
    const nlohmann::json& content = mf.Get("content");
    std::string text;
    if (content.is_string()) {
      text = content.get<std::string>();
    } else if (content.is_array()) {
      // Text parts, joined by newlines as vLLM joins them.
      for (size_t j = 0; j < content.size(); ++j) {
        const nlohmann::json& part = content[j];
        std::string part_path = fmt::format("{}.content[{}]", path, j);
        if (!part.is_object()) return f.Fail(part_path, fmt::format("expected an object, got {}", JsonTypeName(part)));
        const nlohmann::json& type = part.contains("type") ? part["type"] : nlohmann::json();
        if (type != "text") {
          return f.Fail(part_path + ".type",
                        fmt::format("only text parts are supported, got {}", type.is_null() ? "none" : type.dump()));
        }
        if (!part.contains("text") || !part["text"].is_string()) return f.Fail(part_path + ".text", "expected a string");
        if (j > 0) text += '\n';
        text += part["text"].get<std::string>();
      }
    } else if (content.is_null()) {
      if (role != "assistant") return f.Fail(path + ".content", "is required");
    } else {
      return f.Fail(path + ".content",
                    fmt::format("expected a string or a list of text parts, got {}", JsonTypeName(content)));
    }
    nlohmann::ordered_json message = {{"role", role}, {"content", std::move(text)}};
    if (!ReadToolMessageFields(f, m, path, &message)) return false;
    out->push_back(std::move(message));
  }
  return true;
}

// A list of token ids, from a JSON array already known to hold numbers.
bool ReadIds(JsonFields& f, const nlohmann::json& list, const std::string& path, std::vector<int32_t>* out) {
  if (list.empty()) return f.Fail(path, "must not be empty");
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& v = list[i];
    std::string item = fmt::format("{}[{}]", path, i);
    std::optional<int64_t> id = JsonInteger(v);
    if (!id) return f.Fail(item, fmt::format("expected a token id, got {}", v.is_number() ? v.dump() : JsonTypeName(v)));
    if (*id < 0 || *id > kInt32Max) return f.Fail(item, fmt::format("token ids must be in [0, {}], got {}", kInt32Max, *id));
    out->push_back(static_cast<int32_t>(*id));
  }
  return true;
}

// prompt: a string, a list of strings, a list of ids or a list of lists of ids.
bool ReadPrompts(JsonFields& f, std::vector<PromptInput>* out) {
  const nlohmann::json& prompt = f.Get("prompt");
  const char* kShapes = "a string, a list of strings, a list of token ids or a list of lists of token ids";
  if (prompt.is_null()) return f.Fail("prompt", "is required");
  if (prompt.is_string()) {
    if (prompt.get_ref<const std::string&>().empty()) return f.Fail("prompt", "must not be empty");
    out->push_back({prompt.get<std::string>(), {}});
    return true;
  }
  if (!prompt.is_array()) return f.Fail("prompt", fmt::format("expected {}, got {}", kShapes, JsonTypeName(prompt)));
  if (prompt.empty()) return f.Fail("prompt", "must not be empty");
  const nlohmann::json& first = prompt[0];
  if (first.is_number()) {
    PromptInput input;
    if (!ReadIds(f, prompt, "prompt", &input.ids)) return false;
    out->push_back(std::move(input));
    return true;
  }
  if (prompt.size() > kMaxPrompts) {
    return f.Fail("prompt", fmt::format("at most {} prompts are allowed, got {}", kMaxPrompts, prompt.size()));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    const nlohmann::json& item = prompt[i];
    std::string path = fmt::format("prompt[{}]", i);
    PromptInput input;
    if (first.is_string() && item.is_string()) {
      if (item.get_ref<const std::string&>().empty()) return f.Fail(path, "must not be empty");
      input.text = item.get<std::string>();
    } else if (first.is_array() && item.is_array()) {
      if (!ReadIds(f, item, path, &input.ids)) return false;
    } else {
      return f.Fail(path, fmt::format("expected {} (every item of one kind), got {}", kShapes, JsonTypeName(item)));
    }
    out->push_back(std::move(input));
  }
  return true;
}

ApiStatus CheckChoiceCount(const CompletionRequest& r) {
  size_t prompts = r.endpoint == Endpoint::kChat ? 1 : r.prompts.size();
  if (prompts * static_cast<size_t>(r.n) > static_cast<size_t>(kMaxChoicesPerRequest)) {
    return BadRequest("n", fmt::format("n times the number of prompts must be at most {}, got {} x {}",
                                       kMaxChoicesPerRequest, r.n, prompts));
  }
  return std::nullopt;
}

}  // namespace

ApiStatus ParseChatRequest(const nlohmann::json& body, CompletionRequest* out) {
  SamplingParams defaults = std::move(out->params);
  *out = CompletionRequest();
  out->params = std::move(defaults);
  out->endpoint = Endpoint::kChat;
  JsonFields f(body);
  if (!ReadSampling(f, out)) return f.error();
  if (!ReadMessages(f, &out->messages)) return f.error();
  std::optional<bool> logprobs;
  if (!f.Bool("logprobs", &logprobs)) return f.error();
  out->params.logprobs = logprobs.value_or(false);
  std::optional<int64_t> top;
  if (!f.Integer("top_logprobs", 0, 20, &top)) return f.error();
  if (top && *top > 0 && !out->params.logprobs) {
    f.Fail("top_logprobs", "needs logprobs set to true");
    return f.error();
  }
  out->params.top_logprobs = static_cast<int32_t>(top.value_or(0));
  return CheckChoiceCount(*out);
}

ApiStatus ParseCompletionRequest(const nlohmann::json& body, CompletionRequest* out) {
  SamplingParams defaults = std::move(out->params);
  *out = CompletionRequest();
  out->params = std::move(defaults);
  out->endpoint = Endpoint::kCompletion;
  JsonFields f(body);
  if (!ReadSampling(f, out)) return f.error();
  if (!ReadPrompts(f, &out->prompts)) return f.error();
  // The legacy form: logprobs is the number of alternatives, 0 for the
  // chosen tokens alone.
  std::optional<int64_t> logprobs;
  if (!f.Integer("logprobs", 0, 20, &logprobs)) return f.error();
  if (logprobs) {
    out->params.logprobs = true;
    out->params.top_logprobs = static_cast<int32_t>(*logprobs);
  }
  std::optional<bool> echo;
  if (!f.Bool("echo", &echo)) return f.error();
  out->echo = echo.value_or(false);
  std::optional<std::string> suffix;
  if (!f.String("suffix", &suffix)) return f.error();
  if (suffix && !suffix->empty()) {
    f.Fail("suffix", "is not supported");
    return f.error();
  }
  return CheckChoiceCount(*out);
}

}  // namespace kiln::server
