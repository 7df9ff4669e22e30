// Chat templates (see chat_template.h): parse once, render per request.
#include "tokenizer/chat_template.h"

#include "jinja/globals.h"
#include "jinja/interpreter.h"
#include "jinja/json_value.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/scope.h"

namespace kiln {

nlohmann::ordered_json MessagesToJson(const std::vector<ChatMessage>& messages) {
  auto out = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::ordered_json message = nlohmann::ordered_json::object();
    message["role"] = m.role;
    message["content"] = m.content;
    if (m.fields.is_object()) {
      for (auto it = m.fields.begin(); it != m.fields.end(); ++it) message[it.key()] = it.value();
    }
    out.push_back(std::move(message));
  }
  return out;
}

Expected<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  auto tokens = jinja::Lex(source);
  if (!tokens.ok()) return tokens.status().WithContext("chat template");
  auto tmpl = jinja::Parse(std::move(*tokens));
  if (!tmpl.ok()) return tmpl.status().WithContext("chat template");
  return ChatTemplate(std::shared_ptr<const jinja::Template>(std::move(*tmpl)),
                      std::make_shared<const std::string>(source));
}

Expected<ChatTemplate> ChatTemplate::FromTokenizerConfig(const nlohmann::json& config,
                                                         std::string_view name) {
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) {
    return NotFound("tokenizer_config.json has no chat_template");
  }
  const nlohmann::json& field = config["chat_template"];
  if (field.is_string()) return Parse(field.get_ref<const std::string&>());
  if (!field.is_array()) {
    return Corrupt("tokenizer_config.json: chat_template is neither a string nor a list");
  }
  std::string_view wanted = name.empty() ? "default" : name;
  for (const nlohmann::json& entry : field) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string()) {
      return Corrupt("tokenizer_config.json: chat_template list entries need string 'name' and 'template'");
    }
    if (entry["name"].get_ref<const std::string&>() == wanted) {
      return Parse(entry["template"].get_ref<const std::string&>());
    }
  }
  return NotFound("tokenizer_config.json: no chat template named '{}'", wanted);
}

template <typename Json>
Expected<std::string> ChatTemplate::RenderJson(const Json& messages, bool add_generation_prompt,
                                               const Json& extra, const RenderOptions& options) const {
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  jinja::Runtime rt(options.limits, now);
  auto globals = std::make_shared<jinja::Scope>();
  for (auto& [name, fn] : jinja::GlobalFunctions()) globals->Set(name, std::move(fn));
  globals->Set("tools", jinja::Value::None());
  globals->Set("documents", jinja::Value::None());
  auto converted = jinja::ValueFromJson(messages);
  if (!converted.ok()) return converted.status().WithContext("chat template: messages");
  globals->Set("messages", std::move(*converted));
  globals->Set("add_generation_prompt", jinja::Value::Bool(add_generation_prompt));
  if (!extra.is_object()) return InvalidArgument("chat template: extra variables must be a JSON object");
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    if (it.key() == "messages" || it.key() == "add_generation_prompt") {
      return InvalidArgument("chat template: extra variable '{}' would replace a render argument", it.key());
    }
    auto value = jinja::ValueFromJson(it.value());
    if (!value.ok()) return value.status().WithContext("chat template: " + it.key());
    globals->Set(it.key(), std::move(*value));
  }
  jinja::Interpreter interpreter(rt);
  auto out = interpreter.Render(*template_, std::move(globals));
  if (!out.ok()) return out.status().WithContext("chat template");
  return std::move(*out);
}

Expected<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                           const nlohmann::ordered_json& extra,
                                           const RenderOptions& options) const {
  return RenderJson(messages, add_generation_prompt, extra, options);
}

Expected<std::string> ChatTemplate::Render(const nlohmann::json& messages, bool add_generation_prompt,
                                           const nlohmann::json& extra, const RenderOptions& options) const {
  return RenderJson(messages, add_generation_prompt, extra, options);
}

Expected<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                           bool add_generation_prompt, const nlohmann::ordered_json& extra,
                                           const RenderOptions& options) const {
  return RenderJson(MessagesToJson(messages), add_generation_prompt, extra, options);
}

nlohmann::ordered_json SpecialTokenVariables(const nlohmann::json& tokenizer_config) {
  auto out = nlohmann::ordered_json::object();
  if (!tokenizer_config.is_object()) return out;
  for (const char* key :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!tokenizer_config.contains(key)) continue;
    const nlohmann::json& token = tokenizer_config[key];
    if (token.is_string()) {
      out[key] = token.get<std::string>();
    } else if (token.is_object() && token.contains("content") && token["content"].is_string()) {
      out[key] = token["content"].get<std::string>();
    }
  }
  if (tokenizer_config.contains("additional_special_tokens") &&
      tokenizer_config["additional_special_tokens"].is_array()) {
    auto extra = nlohmann::ordered_json::array();
    for (const nlohmann::json& token : tokenizer_config["additional_special_tokens"]) {
      if (token.is_string()) {
        extra.push_back(token.get<std::string>());
      } else if (token.is_object() && token.contains("content") && token["content"].is_string()) {
        extra.push_back(token["content"].get<std::string>());
      }
    }
    out["additional_special_tokens"] = std::move(extra);
  }
  return out;
}

}  // namespace kiln
