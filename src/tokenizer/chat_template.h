// A model's chat template: the Jinja program in tokenizer_config.json's
// `chat_template` (or GGUF's tokenizer.chat_template) that turns a
// conversation into prompt text. Renders byte for byte what Hugging Face's
// apply_chat_template renders with jinja2, and treats the template as
// untrusted input: every render runs under RenderLimits.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "jinja/render_limits.h"

namespace kiln {

namespace jinja {
struct Template;
}  // namespace jinja

// One message of a conversation. `fields` holds any further keys the
// template may read (tool_calls, reasoning_content, name, ...).
struct ChatMessage {
  std::string role;
  std::string content;
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
};

// {"role": ..., "content": ..., fields...} for each message.
nlohmann::ordered_json MessagesToJson(const std::vector<ChatMessage>& messages);

struct RenderOptions {
  RenderLimits limits;
  // The local time strftime_now() reports; the current time when unset.
  std::optional<std::tm> now;
};

// Parsed once, a template may be rendered any number of times, from several
// threads at once: rendering reads the parsed template and nothing else
// shared.
class ChatTemplate {
 public:
  // Parses a template. Errors read "chat template: LINE:COLUMN: problem".
  static Expected<ChatTemplate> Parse(std::string_view source);

  // The template of a parsed tokenizer_config.json. Its `chat_template` is
  // a string, or a list of {"name", "template"} from which `name` picks one
  // ("default" when empty). NotFound when the config has none.
  static Expected<ChatTemplate> FromTokenizerConfig(const nlohmann::json& config, std::string_view name = "");

  // Renders `messages`, a JSON array of {role, content, ...} objects, with
  // `add_generation_prompt` and the variables in `extra` (bos_token,
  // eos_token, tools, date_string, enable_thinking, ...). As in Hugging
  // Face, `tools` and `documents` are none unless `extra` sets them.
  // Template errors (raise_exception, misuse of undefined values, exceeded
  // limits) come back as a Status naming the template line and column;
  // rendering never throws.
  //
  // Use ordered_json to keep objects' keys in their original order, as
  // Python's dicts do: it shows wherever a template prints JSON (tojson of
  // tool schemas). nlohmann::json sorts keys.
  Expected<std::string> Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& extra = nlohmann::ordered_json::object(),
                               const RenderOptions& options = {}) const;
  Expected<std::string> Render(const nlohmann::json& messages, bool add_generation_prompt,
                               const nlohmann::json& extra = nlohmann::json::object(),
                               const RenderOptions& options = {}) const;
  Expected<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& extra = nlohmann::ordered_json::object(),
                               const RenderOptions& options = {}) const;

  // The template text this was parsed from.
  const std::string& source() const { return *source_; }

 private:
  ChatTemplate(std::shared_ptr<const jinja::Template> tmpl, std::shared_ptr<const std::string> source)
      : template_(std::move(tmpl)), source_(std::move(source)) {}

  template <typename Json>
  Expected<std::string> RenderJson(const Json& messages, bool add_generation_prompt, const Json& extra,
                                   const RenderOptions& options) const;

  std::shared_ptr<const jinja::Template> template_;
  std::shared_ptr<const std::string> source_;
};

// The special-token variables Hugging Face passes to every render, from a
// tokenizer_config.json: bos_token, eos_token, unk_token, pad_token and
// the like, as strings (the config may spell them as AddedToken objects).
nlohmann::ordered_json SpecialTokenVariables(const nlohmann::json& tokenizer_config);

}  // namespace kiln
