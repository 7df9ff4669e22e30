// Prompts and messages flattened into text in request order.
#include "router/affinity_text.h"

#include <nlohmann/json.hpp>

namespace kiln::router {
namespace {

using Json = nlohmann::json;

// Text of a prompt or a message's content: a string, text parts, or token ids.
void AppendContent(const Json& value, std::string* out) {
  if (value.is_string()) {
    *out += value.get_ref<const std::string&>();
  } else if (value.is_array()) {
    for (const Json& item : value) {
      if (item.is_object()) {
        auto text = item.find("text");
        if (text != item.end() && text->is_string()) *out += text->get_ref<const std::string&>();
      } else if (item.is_number_integer()) {
        *out += std::to_string(item.get<int64_t>());
        *out += ' ';
      } else {
        AppendContent(item, out);
      }
    }
  }
}

}  // namespace

std::string AffinityText(std::string_view body, ApiKind kind) {
  Json request = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!request.is_object()) return "";
  std::string text;
  if (kind == ApiKind::kCompletion) {
    auto prompt = request.find("prompt");
    if (prompt != request.end()) AppendContent(*prompt, &text);
    return text;
  }
  // Templates render tool definitions before the conversation.
  auto tools = request.find("tools");
  if (tools != request.end() && tools->is_array()) text += tools->dump();
  auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array()) return text;
  for (const Json& message : *messages) {
    if (!message.is_object()) continue;
    auto role = message.find("role");
    if (role != message.end() && role->is_string()) text += role->get_ref<const std::string&>();
    text += '\n';
    auto content = message.find("content");
    if (content != message.end()) AppendContent(*content, &text);
    text += '\n';
  }
  return text;
}

}  // namespace kiln::router
