// Reading generation_config.json.
#include "engine/generation_config.h"

#include <filesystem>

#include "core/json_input.h"
#include "core/mapped_file.h"

namespace kiln {
namespace {

Expected<std::optional<double>> OptionalNumber(const nlohmann::json& j, const char* key,
                                               const std::string& name) {
  const nlohmann::json* v = JsonField(j, key);
  if (v == nullptr || v->is_null()) return std::optional<double>();
  if (!v->is_number()) return Corrupt("{}: field {} must be a number", name, key);
  return std::optional<double>(v->get<double>());
}

Expected<std::optional<int32_t>> OptionalInt(const nlohmann::json& j, const char* key,
                                             const std::string& name) {
  const nlohmann::json* v = JsonField(j, key);
  if (v == nullptr || v->is_null()) return std::optional<int32_t>();
  if (!v->is_number_integer() || v->get<int64_t>() < INT32_MIN || v->get<int64_t>() > INT32_MAX) {
    return Corrupt("{}: field {} must be a 32-bit integer", name, key);
  }
  return std::optional<int32_t>(static_cast<int32_t>(v->get<int64_t>()));
}

}  // namespace

SamplingParams GenerationConfig::DefaultSamplingParams() const {
  SamplingParams p;
  if (do_sample.has_value() && !*do_sample) {
    p.temperature = 0;
  } else {
    if (temperature) p.temperature = *temperature;
    if (top_k) p.top_k = *top_k;
    if (top_p) p.top_p = *top_p;
    if (min_p) p.min_p = *min_p;
  }
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (max_new_tokens && *max_new_tokens > 0) p.max_tokens = *max_new_tokens;
  // Published values outside what kiln accepts fall back to the defaults.
  if (!p.Validate().ok()) {
    SamplingParams fallback;
    fallback.temperature = p.temperature > 0 ? 1.0 : 0.0;
    return fallback;
  }
  return p;
}

Expected<GenerationConfig> ParseGenerationConfig(const std::string& json_text, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonText(json_text, name));
  if (!j.is_object()) return Corrupt("{}: expected a JSON object", name);
  GenerationConfig c;
  if (const nlohmann::json* eos = JsonField(j, "eos_token_id"); eos != nullptr && !eos->is_null()) {
    auto add = [&](const nlohmann::json& v) -> Status {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return Corrupt("{}: eos_token_id must be a non-negative integer or a list of them", name);
      }
      c.eos_token_ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
      return Status::Ok();
    };
    if (eos->is_array()) {
      for (const nlohmann::json& v : *eos) KILN_RETURN_IF_ERROR(add(v));
    } else {
      KILN_RETURN_IF_ERROR(add(*eos));
    }
  }
  if (const nlohmann::json* v = JsonField(j, "do_sample"); v != nullptr && !v->is_null()) {
    if (!v->is_boolean()) return Corrupt("{}: field do_sample must be true or false", name);
    c.do_sample = v->get<bool>();
  }
  KILN_ASSIGN_OR_RETURN(c.temperature, OptionalNumber(j, "temperature", name));
  KILN_ASSIGN_OR_RETURN(c.top_k, OptionalInt(j, "top_k", name));
  KILN_ASSIGN_OR_RETURN(c.top_p, OptionalNumber(j, "top_p", name));
  KILN_ASSIGN_OR_RETURN(c.min_p, OptionalNumber(j, "min_p", name));
  KILN_ASSIGN_OR_RETURN(c.repetition_penalty, OptionalNumber(j, "repetition_penalty", name));
  KILN_ASSIGN_OR_RETURN(c.max_new_tokens, OptionalInt(j, "max_new_tokens", name));
  return c;
}

Expected<GenerationConfig> ReadGenerationConfig(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return GenerationConfig{};
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseGenerationConfig(text, path);
}

}  // namespace kiln
