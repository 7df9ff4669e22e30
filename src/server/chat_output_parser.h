// Splits a chat reply, as it streams in, into its answer text, its
// reasoning (a <think> block) and its tool calls in the template's format,
// so that the client sees `content`, `reasoning_content` and `tool_calls`
// as OpenAI's API gives them. Text that may be the start of a marker
// (<tool_call>, </think>) is held back until it is known not to be one, so
// no fragment of a marker reaches `content`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_prompt.h"
#include "tokenizer/tool_call_format.h"

namespace kiln::server {

// One piece of a parsed reply.
struct ChatDelta {
  enum class Kind {
    kContent,        // text: answer text
    kReasoning,      // text: thinking text
    kToolCallStart,  // a new call: index, id, text = the function's name
    kToolArguments,  // text: the next bytes of call `index`'s arguments JSON (never empty)
  };
  Kind kind = Kind::kContent;
  std::string text;
  int index = 0;
  std::string id;
};

struct ChatOutputOptions {
  bool tool_calls = false;  // look for calls (tools given and tool_choice not none)
  ToolCallFormat format = ToolCallFormat::kHermes;
  ThinkingMode thinking = ThinkingMode::kNone;
};

// A fresh id for a tool call: "call_" and 24 random letters and digits.
std::string NewToolCallId();

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatOutputOptions options);

  // The pieces that `text`, the reply's next bytes, completes.
  std::vector<ChatDelta> Feed(std::string_view text);
  // The reply has ended: what was held back. A call cut off before its
  // name is dropped; one cut off in its arguments keeps what came.
  std::vector<ChatDelta> Finish();

  int num_tool_calls() const { return num_calls_; }

 private:
  enum class State {
    kThinkStart,  // may open with <think>
    kThinking,
    kContent,
    kCallHeader,  // {"name": "...", "arguments":
    kArguments,   // the arguments' JSON
    kCallEnd,     // the call object's closing brace
    kAfterCall,   // the format's closing text, or a separator before another call
    kListOpen,    // Mistral: the "[" after [TOOL_CALLS]
  };

  // One step on pending_; false when it needs more text.
  bool Step(std::vector<ChatDelta>* out, bool at_end);
  bool StepContent(std::vector<ChatDelta>* out, bool at_end);
  bool StepHeader(std::vector<ChatDelta>* out, bool at_end);
  bool StepArguments(std::vector<ChatDelta>* out);
  bool StepAfterCall(bool at_end);
  void EmitContent(std::string text, std::vector<ChatDelta>* out);
  // A call whose text is not in the expected shape: read as a whole JSON
  // object when it is one, else given back as content.
  bool RecoverCall(std::vector<ChatDelta>* out, bool at_end);

  ChatOutputOptions options_;
  std::vector<std::string> triggers_;
  State state_;
  std::string pending_;      // text not yet given out
  std::string call_text_;    // the current call's text since its trigger, for recovery
  bool strip_leading_space_ = false;
  int num_calls_ = 0;
  // The arguments scan: nesting depth, inside a string, after a backslash.
  bool args_started_ = false;
  bool args_primitive_ = false;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

// A whole reply parsed at once.
struct ParsedChatOutput {
  std::string content;
  std::string reasoning;
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();  // OpenAI's message.tool_calls
};
ParsedChatOutput ParseChatOutput(const ChatOutputOptions& options, std::string_view text);

}  // namespace kiln::server
