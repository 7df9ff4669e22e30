// Fuzzes the reading of chat replies (the model's text is arbitrary): the
// first byte picks the tool-call format, thinking and whether calls are
// read; the second splits the rest into streamed pieces. Nothing may crash;
// every piece but a call's start carries text, call indices run in order,
// and the streamed pieces add up to the reply read whole.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/chat_output_parser.h"

namespace {

using kiln::server::ChatDelta;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// content, reasoning, then each call's name and arguments, from pieces.
std::string Summary(const std::vector<ChatDelta>& deltas) {
  std::string content, reasoning, calls;
  int next_call = 0;
  for (const ChatDelta& d : deltas) {
    switch (d.kind) {
      case ChatDelta::Kind::kContent:
        Check(!d.text.empty());
        content += d.text;
        break;
      case ChatDelta::Kind::kReasoning:
        Check(!d.text.empty());
        reasoning += d.text;
        break;
      case ChatDelta::Kind::kToolCallStart:
        Check(d.index == next_call++);
        Check(d.id.size() == 29 && d.id.rfind("call_", 0) == 0);
        calls += "\x01" + d.text + "\x02";
        break;
      case ChatDelta::Kind::kToolArguments:
        Check(!d.text.empty());
        Check(d.index == next_call - 1);
        calls += d.text;
        break;
    }
  }
  return content + '\0' + reasoning + '\0' + calls;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  kiln::server::ChatOutputOptions options;
  options.tool_calls = (data[0] & 1) != 0;
  options.format = static_cast<kiln::ToolCallFormat>((data[0] >> 1) % 3);
  options.thinking = static_cast<kiln::ThinkingMode>((data[0] >> 3) % 3);
  const size_t step = 1 + data[1] % 16;
  std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  kiln::server::ChatOutputParser whole(options);
  std::vector<ChatDelta> all = whole.Feed(text);
  std::vector<ChatDelta> rest = whole.Finish();
  all.insert(all.end(), rest.begin(), rest.end());

  kiln::server::ChatOutputParser streamed(options);
  std::vector<ChatDelta> pieces;
  for (size_t i = 0; i < text.size(); i += step) {
    std::vector<ChatDelta> d = streamed.Feed(text.substr(i, step));
    pieces.insert(pieces.end(), d.begin(), d.end());
  }
  rest = streamed.Finish();
  pieces.insert(pieces.end(), rest.begin(), rest.end());

  Check(Summary(all) == Summary(pieces));
  Check(whole.num_tool_calls() == streamed.num_tool_calls());
  if (!options.tool_calls) Check(whole.num_tool_calls() == 0);
  return 0;
}
