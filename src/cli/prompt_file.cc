// Prompt files: plain lines or JSON Lines.
#include "cli/prompt_file.h"

#include "core/json_input.h"
#include "core/mapped_file.h"

namespace kiln {
namespace {

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Reads the optional fields of one JSON line into `p`.
Status ApplyParams(const nlohmann::json& j, const std::string& where, SamplingParams& p) {
  auto number = [&](const char* key, double* out) -> Status {
    const nlohmann::json* v = JsonField(j, key);
    if (v == nullptr || v->is_null()) return Status::Ok();
    if (!v->is_number()) return InvalidArgument("{}: field {} must be a number", where, key);
    *out = v->get<double>();
    return Status::Ok();
  };
  auto integer = [&](const char* key, int32_t* out) -> Status {
    const nlohmann::json* v = JsonField(j, key);
    if (v == nullptr || v->is_null()) return Status::Ok();
    if (!v->is_number_integer() || v->get<int64_t>() < INT32_MIN || v->get<int64_t>() > INT32_MAX) {
      return InvalidArgument("{}: field {} must be a 32-bit integer", where, key);
    }
    *out = static_cast<int32_t>(v->get<int64_t>());
    return Status::Ok();
  };
  auto boolean = [&](const char* key, bool* out) -> Status {
    const nlohmann::json* v = JsonField(j, key);
    if (v == nullptr || v->is_null()) return Status::Ok();
    if (!v->is_boolean()) return InvalidArgument("{}: field {} must be true or false", where, key);
    *out = v->get<bool>();
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(integer("max_tokens", &p.max_tokens));
  KILN_RETURN_IF_ERROR(integer("min_tokens", &p.min_tokens));
  KILN_RETURN_IF_ERROR(number("temperature", &p.temperature));
  KILN_RETURN_IF_ERROR(integer("top_k", &p.top_k));
  KILN_RETURN_IF_ERROR(number("top_p", &p.top_p));
  KILN_RETURN_IF_ERROR(number("min_p", &p.min_p));
  KILN_RETURN_IF_ERROR(number("repetition_penalty", &p.repetition_penalty));
  KILN_RETURN_IF_ERROR(number("presence_penalty", &p.presence_penalty));
  KILN_RETURN_IF_ERROR(number("frequency_penalty", &p.frequency_penalty));
  KILN_RETURN_IF_ERROR(boolean("ignore_eos", &p.ignore_eos));
  KILN_RETURN_IF_ERROR(boolean("logprobs", &p.logprobs));
  KILN_RETURN_IF_ERROR(integer("top_logprobs", &p.top_logprobs));
  if (const nlohmann::json* v = JsonField(j, "seed"); v != nullptr && !v->is_null()) {
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0)) {
      return InvalidArgument("{}: field seed must be a non-negative integer", where);
    }
    p.seed = v->get<uint64_t>();
  }
  if (const nlohmann::json* v = JsonField(j, "stop"); v != nullptr && !v->is_null()) {
    p.stop.clear();
    if (v->is_string()) {
      p.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const nlohmann::json& s : *v) {
        if (!s.is_string()) {
          return InvalidArgument("{}: field stop must be a string or a list of strings", where);
        }
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return InvalidArgument("{}: field stop must be a string or a list of strings", where);
    }
  }
  if (const nlohmann::json* v = JsonField(j, "stop_token_ids"); v != nullptr && !v->is_null()) {
    if (!v->is_array()) return InvalidArgument("{}: field stop_token_ids must be a list of ids", where);
    p.stop_token_ids.clear();
    for (const nlohmann::json& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return InvalidArgument("{}: field stop_token_ids must be a list of ids", where);
      }
      p.stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  Status valid = p.Validate();
  if (!valid.ok()) return InvalidArgument("{}: {}", where, valid.message());
  return Status::Ok();
}

Expected<PromptSpec> ParseJsonLine(std::string_view line, const std::string& where,
                                   const SamplingParams& defaults) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonText(line, where));
  if (!j.is_object()) return InvalidArgument("{}: expected a JSON object", where);
  PromptSpec spec;
  spec.params = defaults;
  int given = 0;
  if (const nlohmann::json* v = JsonField(j, "prompt"); v != nullptr) {
    if (!v->is_string()) return InvalidArgument("{}: field prompt must be a string", where);
    spec.prompt = v->get<std::string>();
    ++given;
  }
  if (const nlohmann::json* v = JsonField(j, "prompt_ids"); v != nullptr) {
    if (!v->is_array() || v->empty()) {
      return InvalidArgument("{}: field prompt_ids must be a list of ids", where);
    }
    for (const nlohmann::json& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return InvalidArgument("{}: field prompt_ids must be a list of ids", where);
      }
      spec.prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    ++given;
  }
  if (const nlohmann::json* v = JsonField(j, "messages"); v != nullptr) {
    if (!v->is_array() || v->empty()) {
      return InvalidArgument("{}: field messages must be a list of messages", where);
    }
    for (const nlohmann::json& m : *v) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        return InvalidArgument("{}: every message needs a string role", where);
      }
    }
    // Ordered, as the chat template may print the messages.
    spec.messages = nlohmann::ordered_json::parse(v->dump());
    ++given;
  }
  if (given != 1) return InvalidArgument("{}: give exactly one of prompt, prompt_ids and messages", where);
  KILN_RETURN_IF_ERROR(ApplyParams(j, where, spec.params));
  return spec;
}

}  // namespace

Expected<std::vector<PromptSpec>> ParsePromptFile(std::string_view text, const std::string& name,
                                                  const SamplingParams& defaults) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(TrimRight(text.substr(start, end - start)));
    start = end + 1;
  }
  bool jsonl = name.size() >= 6 && name.compare(name.size() - 6, 6, ".jsonl") == 0;
  for (std::string_view line : lines) {
    if (IsBlank(line)) continue;
    jsonl = jsonl || line.substr(line.find_first_not_of(" \t")).front() == '{';
    break;
  }
  std::vector<PromptSpec> specs;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (IsBlank(lines[i])) continue;
    std::string where = fmt::format("{}: line {}", name, i + 1);
    if (jsonl) {
      KILN_ASSIGN_OR_RETURN(PromptSpec spec, ParseJsonLine(lines[i], where, defaults));
      spec.line = static_cast<int64_t>(i + 1);
      specs.push_back(std::move(spec));
    } else {
      PromptSpec spec;
      spec.prompt = std::string(lines[i]);
      spec.params = defaults;
      spec.line = static_cast<int64_t>(i + 1);
      specs.push_back(std::move(spec));
    }
  }
  if (specs.empty()) return InvalidArgument("{}: no prompts", name);
  return specs;
}

Expected<std::vector<PromptSpec>> ReadPromptFile(const std::string& path, const SamplingParams& defaults) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParsePromptFile(text, path, defaults);
}

}  // namespace kiln
