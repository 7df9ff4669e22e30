// Reading the tool fields of a chat completions body.
#include "server/tool_request.h"

#include <set>

#include <fmt/format.h>

namespace kiln::server {
namespace {

using OJson = nlohmann::ordered_json;

constexpr size_t kMaxToolNameLength = 64;
constexpr size_t kMaxToolCallsPerMessage = 128;

// OpenAI's rule for function names: letters, digits, underscores and
// dashes, at most 64. It also keeps names safe inside generated grammars.
bool ValidToolName(const std::string& name) {
  if (name.empty() || name.size() > kMaxToolNameLength) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string NameProblem(const std::string& name) {
  return fmt::format("must be 1 to {} letters, digits, underscores or dashes, got {}", kMaxToolNameLength,
                     OJson(name).dump());
}

ApiStatus ReadTool(const OJson& tool, size_t i, ToolFunction* out) {
  const std::string path = fmt::format("tools[{}]", i);
  if (!tool.is_object()) return BadRequest(path, fmt::format("{}: expected an object, got {}", path, tool.type_name()));
  auto type = tool.find("type");
  if (type != tool.end() && !type->is_null() && *type != "function") {
    return BadRequest(path + ".type",
                      fmt::format("{}.type: only \"function\" tools are supported, got {}", path, type->dump()));
  }
  auto function = tool.find("function");
  if (function == tool.end() || function->is_null()) {
    return BadRequest(path + ".function", fmt::format("{}.function: is required", path));
  }
  if (!function->is_object()) {
    return BadRequest(path + ".function",
                      fmt::format("{}.function: expected an object, got {}", path, function->type_name()));
  }
  auto name = function->find("name");
  if (name == function->end() || name->is_null()) {
    return BadRequest(path + ".function.name", fmt::format("{}.function.name: is required", path));
  }
  if (!name->is_string() || !ValidToolName(name->get<std::string>())) {
    return BadRequest(path + ".function.name",
                      fmt::format("{}.function.name: {}", path,
                                  name->is_string() ? NameProblem(name->get<std::string>())
                                                    : fmt::format("expected a string, got {}", name->type_name())));
  }
  out->name = name->get<std::string>();
  auto description = function->find("description");
  if (description != function->end() && !description->is_null()) {
    if (!description->is_string()) {
      return BadRequest(path + ".function.description",
                        fmt::format("{}.function.description: expected a string, got {}", path,
                                    description->type_name()));
    }
    out->description = description->get<std::string>();
  }
  auto parameters = function->find("parameters");
  if (parameters != function->end() && !parameters->is_null()) {
    if (!parameters->is_object()) {
      return BadRequest(path + ".function.parameters",
                        fmt::format("{}.function.parameters: expected a JSON Schema object, got {}", path,
                                    parameters->type_name()));
    }
    out->parameters = *parameters;
  } else {
    out->parameters = OJson::object();
  }
  return std::nullopt;
}

ApiStatus ReadToolChoice(const OJson& choice, bool have_tools, ToolRequest* out) {
  const char* kShapes = "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (choice.is_string()) {
    const std::string& s = choice.get_ref<const std::string&>();
    if (s == "auto") {
      out->choice = ToolChoiceMode::kAuto;
    } else if (s == "none") {
      out->choice = ToolChoiceMode::kNone;
    } else if (s == "required") {
      out->choice = ToolChoiceMode::kRequired;
    } else {
      return BadRequest("tool_choice", fmt::format("tool_choice: expected {}, got {}", kShapes, choice.dump()));
    }
  } else if (choice.is_object()) {
    auto type = choice.find("type");
    auto function = choice.find("function");
    if (type == choice.end() || *type != "function" || function == choice.end() || !function->is_object() ||
        !function->contains("name") || !(*function)["name"].is_string()) {
      return BadRequest("tool_choice", fmt::format("tool_choice: expected {}", kShapes));
    }
    out->choice = ToolChoiceMode::kNamed;
    out->choice_name = (*function)["name"].get<std::string>();
    bool found = false;
    for (const ToolFunction& t : out->tools) found = found || t.name == out->choice_name;
    if (!found) {
      return BadRequest("tool_choice", fmt::format("tool_choice: names the function {}, which is not among the tools",
                                                   OJson(out->choice_name).dump()));
    }
  } else {
    return BadRequest("tool_choice", fmt::format("tool_choice: expected {}, got {}", kShapes, choice.type_name()));
  }
  if (!have_tools && (out->choice == ToolChoiceMode::kRequired || out->choice == ToolChoiceMode::kNamed)) {
    return BadRequest("tool_choice", "tool_choice: requires tools; none are given");
  }
  return std::nullopt;
}

}  // namespace

ApiStatus ParseToolRequest(const OJson& body, ToolRequest* out) {
  *out = ToolRequest();
  if (!body.is_object()) return std::nullopt;
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) {
      return BadRequest("tools", fmt::format("tools: expected a list of tools, got {}", tools->type_name()));
    }
    if (tools->size() > kMaxTools) {
      return BadRequest("tools", fmt::format("tools: at most {} tools are allowed, got {}", kMaxTools, tools->size()));
    }
    if (tools->dump().size() > kMaxToolsBytes) {
      return BadRequest("tools", fmt::format("tools: the tools' JSON may be at most {} bytes", kMaxToolsBytes));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      ToolFunction tool;
      if (ApiStatus e = ReadTool((*tools)[i], i, &tool)) return e;
      if (!names.insert(tool.name).second) {
        std::string path = fmt::format("tools[{}].function.name", i);
        return BadRequest(path, fmt::format("{}: {} names another tool too; names must be unique", path,
                                            OJson(tool.name).dump()));
      }
      out->tools.push_back(std::move(tool));
    }
    out->tools_json = *tools;
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (ApiStatus e = ReadToolChoice(*choice, !out->tools.empty(), out)) return e;
  }
  auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) {
      return BadRequest("parallel_tool_calls",
                        fmt::format("parallel_tool_calls: expected a boolean, got {}", parallel->type_name()));
    }
    out->parallel = parallel->get<bool>();
  }
  return std::nullopt;
}

bool ReadToolMessageFields(JsonFields& f, const nlohmann::json& m, const std::string& path, OJson* message) {
  const std::string role = (*message)["role"].get<std::string>();
  if (role == "tool") {
    auto id = m.find("tool_call_id");
    if (id != m.end() && !id->is_null()) {
      if (!id->is_string()) {
        return f.Fail(path + ".tool_call_id", fmt::format("expected a string, got {}", JsonTypeName(*id)));
      }
      (*message)["tool_call_id"] = id->get<std::string>();
    }
    auto name = m.find("name");
    if (name != m.end() && name->is_string()) (*message)["name"] = name->get<std::string>();
    return true;
  }
  auto calls = m.find("tool_calls");
  if (calls == m.end() || calls->is_null()) return true;
  if (role != "assistant") return f.Fail(path + ".tool_calls", "only assistant messages may have tool_calls");
  if (!calls->is_array()) {
    return f.Fail(path + ".tool_calls", fmt::format("expected a list, got {}", JsonTypeName(*calls)));
  }
  if (calls->size() > kMaxToolCallsPerMessage) {
    return f.Fail(path + ".tool_calls", fmt::format("at most {} calls are allowed", kMaxToolCallsPerMessage));
  }
  OJson out = OJson::array();
  for (size_t i = 0; i < calls->size(); ++i) {
    const nlohmann::json& call = (*calls)[i];
    const std::string call_path = fmt::format("{}.tool_calls[{}]", path, i);
    if (!call.is_object()) return f.Fail(call_path, fmt::format("expected an object, got {}", JsonTypeName(call)));
    auto type = call.find("type");
    if (type != call.end() && !type->is_null() && *type != "function") {
      return f.Fail(call_path + ".type", fmt::format("only \"function\" calls are supported, got {}", type->dump()));
    }
    auto function = call.find("function");
    if (function == call.end() || !function->is_object()) {
      return f.Fail(call_path + ".function", "expected an object with name and arguments");
    }
    auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return f.Fail(call_path + ".function.name", "expected a non-empty string");
    }
    OJson arguments = OJson::object();
    auto args = function->find("arguments");
    if (args != function->end() && !args->is_null()) {
      if (args->is_string()) {
        // The client sends the JSON text it received; templates print an
        // object with tojson, so it is handed over parsed, keys in order.
        arguments = OJson::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (arguments.is_discarded()) {
          return f.Fail(call_path + ".function.arguments", "expected a string holding a JSON object");
        }
      } else if (args->is_object()) {
        arguments = *args;
      } else {
        return f.Fail(call_path + ".function.arguments",
                      fmt::format("expected a JSON string, got {}", JsonTypeName(*args)));
      }
    }
    OJson item = OJson::object();
    auto id = call.find("id");
    if (id != call.end() && id->is_string()) item["id"] = id->get<std::string>();
    item["type"] = "function";
    item["function"] = {{"name", name->get<std::string>()}, {"arguments", std::move(arguments)}};
    out.push_back(std::move(item));
  }
  (*message)["tool_calls"] = std::move(out);
  return true;
}

}  // namespace kiln::server
