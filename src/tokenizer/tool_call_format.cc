// Tool-call formats of chat templates, and the generic tool prompt.
#include "tokenizer/tool_call_format.h"

namespace kiln {

const char* ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "hermes";
}

ToolCallFormat DetectToolCallFormat(std::string_view source) {
  auto has = [&](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\""))) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kHermes;
}

std::string GenericToolSystemPrompt(const nlohmann::ordered_json& tools) {
  std::string out =
      "# Tools\n\n"
      "You may call one or more functions to help with the user's request. The functions you can call are "
      "described by the JSON signatures within <tools></tools> tags:\n<tools>";
  for (const auto& tool : tools) {
    out += '\n';
    out += tool.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
  }
  out +=
      "\n</tools>\n\n"
      "To call a function, write a JSON object with its name and arguments within <tool_call></tool_call> "
      "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>\n"
      "Function results come back within <tool_response></tool_response> tags.";
  return out;
}

std::string HermesToolCallText(const std::string& name, const nlohmann::ordered_json& arguments) {
  return "<tool_call>\n{\"name\": " + nlohmann::ordered_json(name).dump() + ", \"arguments\": " +
         arguments.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "}\n</tool_call>";
}

}  // namespace kiln
