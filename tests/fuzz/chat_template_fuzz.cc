// Fuzzes chat templates (untrusted input: they travel inside GGUF files):
// the bytes are parsed as a template and rendered with a small fixed
// conversation under tight limits. Nothing may crash, hang or grow without
// bound; a render that succeeds must be well-formed UTF-8 within the
// output limit.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"
#include "tokenizer/chat_template.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

const nlohmann::ordered_json& Messages() {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Grüß dich 👋 — what's 2+2?\n"},
    {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4", "tool_calls": [{"type": "function",
      "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "content": "4"},
    {"role": "user", "content": "  thanks\u3000"}])");
  return messages;
}

const nlohmann::ordered_json& Extra() {
  static const nlohmann::ordered_json extra = nlohmann::ordered_json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false,
    "tools": [{"type": "function", "function": {"name": "add", "description": "Add.",
      "parameters": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}}}]})");
  return extra;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tmpl = kiln::ChatTemplate::Parse(source);
  if (!tmpl.ok()) return 0;
  kiln::RenderOptions options;
  options.limits.max_call_depth = 32;
  options.limits.max_loop_iterations = 20'000;
  options.limits.max_output_bytes = 64 << 10;
  options.limits.max_steps = 300'000;
  options.now = std::tm{};
  options.now->tm_year = 124;
  options.now->tm_mday = 1;
  auto out = tmpl->Render(Messages(), size % 2 == 0, Extra(), options);
  if (out.ok()) {
    Check(out->size() <= options.limits.max_output_bytes);
    Check(kiln::IsValidUtf8(*out));
  }
  return 0;
}
