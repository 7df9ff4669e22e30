// Turning a conversation into prompt text with the model's chat template.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/tool_call_format.h"

namespace kiln {

class ChatTemplate;
class Tokenizer;

// Renders `messages` ([{"role", "content"}, ...]) with the tokenizer's chat
// template and the generation prompt, passing bos_token and eos_token. A
// tokenizer without a template is an InvalidArgument error saying so.
// Encode the result without adding special tokens: the template places them.
Expected<std::string> RenderChatPrompt(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages);

// Where a reply starts relative to a <think> block, for models that think.
enum class ThinkingMode {
  kNone,      // the template knows no <think>: the reply is all answer
  kOptional,  // the reply may open with <think>...</think> before the answer
  kInside,    // the prompt ends inside an open <think>: the reply starts thinking
};

struct ChatPrompt {
  std::string text;
  ToolCallFormat tool_format = ToolCallFormat::kHermes;
  // The template ignores tools, so the generic Hermes-style system prompt
  // (GenericToolSystemPrompt) describes them, and tool calls and results in
  // the history are written into the messages' text in that format.
  bool generic_tool_prompt = false;
  ThinkingMode thinking = ThinkingMode::kNone;
};

// RenderChatPrompt with `tools` (a list of {"type": "function", "function":
// {...}}, possibly empty) passed to the template as `tools`. When the
// template renders the same text with and without them, it ignores tools:
// the generic tool prompt is then added to the system message (one is
// inserted when there is none), assistant tool_calls are appended to their
// content as <tool_call> blocks and tool messages become user messages
// holding <tool_response> blocks. Also tells the template's tool-call
// format and where thinking stands at the end of the prompt.
Expected<ChatPrompt> RenderChatPromptWithTools(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                                               const nlohmann::ordered_json& tools);
// The same with a given template and variables (bos_token, eos_token, ...).
Expected<ChatPrompt> RenderChatPromptWithTools(const ChatTemplate& chat, const nlohmann::ordered_json& variables,
                                               const nlohmann::ordered_json& messages,
                                               const nlohmann::ordered_json& tools);

// The conversation of one user message, after an optional system message.
nlohmann::ordered_json SingleTurnChat(const std::string& user, const std::string& system = "");

}  // namespace kiln
