// Chat prompts through the model's template.
#include "tokenizer/chat_prompt.h"

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

using OJson = nlohmann::ordered_json;

Expected<ChatTemplate> TemplateOf(const Tokenizer& tokenizer) {
  if (tokenizer.chat_template().empty()) {
    return InvalidArgument("{}: the model has no chat template; give a plain prompt instead",
                           tokenizer.source());
  }
  return ChatTemplate::Parse(tokenizer.chat_template());
}

OJson SpecialTokens(const Tokenizer& tokenizer) {
  OJson extra = OJson::object();
  extra["bos_token"] = tokenizer.bos_id() >= 0 ? tokenizer.TokenPiece(tokenizer.bos_id()) : "";
  extra["eos_token"] = tokenizer.eos_id() >= 0 ? tokenizer.TokenPiece(tokenizer.eos_id()) : "";
  return extra;
}

// The conversation with tools carried in text, for a template that ignores them.
OJson WithGenericToolPrompt(const OJson& messages, const OJson& tools) {
  OJson out = OJson::array();
  const std::string prompt = GenericToolSystemPrompt(tools);
  size_t first = 0;
  if (!messages.empty() && messages[0].value("role", "") == "system") {
    OJson system = messages[0];
    std::string content = system.value("content", "");
    system["content"] = content.empty() ? prompt : content + "\n\n" + prompt;
    out.push_back(std::move(system));
    first = 1;
  } else {
    out.push_back({{"role", "system"}, {"content", prompt}});
  }
  for (size_t i = first; i < messages.size(); ++i) {
    OJson m = messages[i];
    const std::string role = m.value("role", "");
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      std::string content = m.value("content", "");
      for (const OJson& call : m["tool_calls"]) {
        const OJson& function = call["function"];
        if (!content.empty()) content += '\n';
        content += HermesToolCallText(function.value("name", ""), function.value("arguments", OJson::object()));
      }
      m.erase("tool_calls");
      m["content"] = content;
      out.push_back(std::move(m));
    } else if (role == "tool") {
      std::string response = "<tool_response>\n" + m.value("content", "") + "\n</tool_response>";
      // Consecutive results share one user turn, as Hermes templates write them.
      if (i > first && messages[i - 1].value("role", "") == "tool") {
        OJson& last = out.back();
        last["content"] = last["content"].get<std::string>() + "\n" + response;
      } else {
        out.push_back({{"role", "user"}, {"content", response}});
      }
    } else {
      out.push_back(std::move(m));
    }
  }
  return out;
}

// Whether the reply starts inside, before or without a <think> block.
ThinkingMode ThinkingAt(const std::string& template_source, const std::string& prompt) {
  if (template_source.find("<think>") == std::string::npos) return ThinkingMode::kNone;
  size_t end = prompt.find_last_not_of(" \t\r\n");
  std::string_view trimmed(prompt.data(), end == std::string::npos ? 0 : end + 1);
  auto ends_with = [&](std::string_view s) {
    return trimmed.size() >= s.size() && trimmed.substr(trimmed.size() - s.size()) == s;
  };
  if (ends_with("<think>")) return ThinkingMode::kInside;
  if (ends_with("</think>")) return ThinkingMode::kNone;  // thinking switched off by an empty block
  return ThinkingMode::kOptional;
}

}  // namespace

Expected<std::string> RenderChatPrompt(const Tokenizer& tokenizer, const OJson& messages) {
  KILN_ASSIGN_OR_RETURN(ChatTemplate chat, TemplateOf(tokenizer));
  return chat.Render(messages, /*add_generation_prompt=*/true, SpecialTokens(tokenizer));
}

Expected<ChatPrompt> RenderChatPromptWithTools(const Tokenizer& tokenizer, const OJson& messages,
                                               const OJson& tools) {
  KILN_ASSIGN_OR_RETURN(ChatTemplate chat, TemplateOf(tokenizer));
  return RenderChatPromptWithTools(chat, SpecialTokens(tokenizer), messages, tools);
}

Expected<ChatPrompt> RenderChatPromptWithTools(const ChatTemplate& chat, const OJson& variables,
                                               const OJson& messages, const OJson& tools) {
  ChatPrompt out;
  out.tool_format = DetectToolCallFormat(chat.source());
  const OJson& extra = variables;
  KILN_ASSIGN_OR_RETURN(std::string plain, chat.Render(messages, /*add_generation_prompt=*/true, extra));
  if (tools.empty()) {
    out.text = std::move(plain);
  } else {
    OJson with_tools = extra;
    with_tools["tools"] = tools;
    KILN_ASSIGN_OR_RETURN(std::string text, chat.Render(messages, /*add_generation_prompt=*/true, with_tools));
    if (text != plain) {
      out.text = std::move(text);
    } else {
      out.generic_tool_prompt = true;
      out.tool_format = ToolCallFormat::kHermes;
      KILN_ASSIGN_OR_RETURN(out.text, chat.Render(WithGenericToolPrompt(messages, tools),
                                                  /*add_generation_prompt=*/true, extra));
    }
  }
  out.thinking = ThinkingAt(chat.source(), out.text);
  return out;
}

OJson SingleTurnChat(const std::string& user, const std::string& system) {
  OJson messages = OJson::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  messages.push_back({{"role", "user"}, {"content", user}});
  return messages;
}

}  // namespace kiln
