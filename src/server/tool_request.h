// The tool fields of a chat completions body: `tools`, `tool_choice` and
// `parallel_tool_calls`, and the tool parts of messages (an assistant's
// `tool_calls`, a `role: "tool"` message's `tool_call_id`), read and
// checked with a 400 naming the field.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace kiln::server {

// Tools one request may declare, and the bytes of their JSON in all.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolsBytes = 512 * 1024;

// One function the model may call.
struct ToolFunction {
  std::string name;
  std::string description;                // empty when not given
  nlohmann::ordered_json parameters;      // a JSON Schema object; {} when not given
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

struct ToolRequest {
  std::vector<ToolFunction> tools;
  // `tools` as given (ordered as the client wrote them), for the template.
  nlohmann::ordered_json tools_json = nlohmann::ordered_json::array();
  ToolChoiceMode choice = ToolChoiceMode::kAuto;
  std::string choice_name;   // kNamed: the function
  bool parallel = true;      // parallel_tool_calls

  // True when the model may (or must) call tools: some are declared and
  // tool_choice is not "none".
  bool active() const { return !tools.empty() && choice != ToolChoiceMode::kNone; }
};

// Reads tools, tool_choice and parallel_tool_calls from a chat body parsed
// with its keys in order (the order shows in the rendered schemas and in
// the order arguments are written). Without tools, tool_choice may only be
// "none" or "auto" (OpenAI's rule); a tool without a name, a name outside
// [a-zA-Z0-9_-] or over 64 characters, parameters that are not an object,
// two tools of one name, or a tool_choice naming no declared tool is a 400
// naming the field.
ApiStatus ParseToolRequest(const nlohmann::ordered_json& body, ToolRequest* out);

// The tool parts of message `m` (at `path`, e.g. "messages[2]") copied into
// `message`, which already holds its role and content: an assistant's
// tool_calls (each {id?, type: "function", function: {name, arguments}}
// with arguments a JSON string, given to the template as the parsed
// object, as templates expect) and a tool message's tool_call_id (and
// name). Returns false after f.Fail on a malformed part.
bool ReadToolMessageFields(JsonFields& f, const nlohmann::json& m, const std::string& path,
                           nlohmann::ordered_json* message);

}  // namespace kiln::server
