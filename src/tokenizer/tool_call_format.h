// How a model writes tool calls, told from its chat template, and the
// generic tool prompt for templates that do not render tools.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

// The tool-call syntaxes of the published template families.
enum class ToolCallFormat {
  // Hermes / Qwen: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one block per call.
  kHermes,
  // Llama 3.1+: {"name": ..., "parameters": {...}}, possibly after <|python_tag|>; calls joined by "; ".
  kLlama3Json,
  // Mistral: [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...].
  kMistral,
};

const char* ToolCallFormatName(ToolCallFormat format);

// The family whose markers the template text uses: <tool_call> is Hermes,
// [TOOL_CALLS] Mistral, <|python_tag|> or Llama's header tokens with a
// "parameters" object Llama 3.1. Anything else gets Hermes, the format of
// the generic tool prompt.
ToolCallFormat DetectToolCallFormat(std::string_view template_source);

// The system prompt that describes `tools` (the request's list of
// {"type": "function", "function": {...}}) to a model whose template does
// not render them, in the Hermes format: the tools as JSON lines between
// <tools></tools>, and how to write a call between <tool_call></tool_call>.
std::string GenericToolSystemPrompt(const nlohmann::ordered_json& tools);

// One call as the Hermes format writes it, for conversation history
// rendered without the template's help: <tool_call>\n{"name": "NAME",
// "arguments": ARGS}\n</tool_call>.
std::string HermesToolCallText(const std::string& name, const nlohmann::ordered_json& arguments);

}  // namespace kiln
