// Reading answer text, reasoning and tool calls out of chat replies, whole
// and streamed piece by piece: the pieces add up to the whole, argument
// fragments are never empty, and no fragment of a marker reaches content.
#include "server/chat_output_parser.h"

#include <gtest/gtest.h>

namespace kiln::server {
namespace chat_output_parser_tests {

using OJson = nlohmann::ordered_json;

ChatOutputOptions Tools(ToolCallFormat format, ThinkingMode thinking = ThinkingMode::kNone) {
  return ChatOutputOptions{true, format, thinking};
}

// Feeds `text` in pieces of `step` bytes and rebuilds the parsed output.
ParsedChatOutput Streamed(const ChatOutputOptions& options, const std::string& text, size_t step,
                          std::vector<ChatDelta>* all = nullptr) {
  ChatOutputParser parser(options);
  std::vector<ChatDelta> deltas;
  for (size_t i = 0; i < text.size(); i += step) {
    auto d = parser.Feed(std::string_view(text).substr(i, step));
    deltas.insert(deltas.end(), d.begin(), d.end());
  }
  auto rest = parser.Finish();
  deltas.insert(deltas.end(), rest.begin(), rest.end());
  ParsedChatOutput out;
  for (const ChatDelta& d : deltas) {
    if (d.kind == ChatDelta::Kind::kContent) out.content += d.text;
    if (d.kind == ChatDelta::Kind::kReasoning) out.reasoning += d.text;
    if (d.kind == ChatDelta::Kind::kToolCallStart) {
      EXPECT_EQ(d.index, static_cast<int>(out.tool_calls.size()));
      EXPECT_EQ(d.id.rfind("call_", 0), 0u);
      out.tool_calls.push_back({{"id", d.id}, {"type", "function"}, {"function", {{"name", d.text}, {"arguments", ""}}}});
    }
    if (d.kind == ChatDelta::Kind::kToolArguments) {
      EXPECT_FALSE(d.text.empty());
      EXPECT_LT(d.index, static_cast<int>(out.tool_calls.size()));
      auto& args = out.tool_calls[static_cast<size_t>(d.index)]["function"]["arguments"];
      args = args.get<std::string>() + d.text;
    }
    if (d.kind != ChatDelta::Kind::kToolCallStart) {
      EXPECT_FALSE(d.text.empty());
    }
  }
  if (all != nullptr) *all = deltas;
  return out;
}

// The whole parse, checked against streaming in every piece size up to 7.
ParsedChatOutput ParseBothWays(const ChatOutputOptions& options, const std::string& text) {
  ParsedChatOutput whole = ParseChatOutput(options, text);
  for (size_t step = 1; step <= 7; ++step) {
    SCOPED_TRACE(step);
    ParsedChatOutput streamed = Streamed(options, text, step);
    EXPECT_EQ(streamed.content, whole.content);
    EXPECT_EQ(streamed.reasoning, whole.reasoning);
    EXPECT_EQ(streamed.tool_calls.size(), whole.tool_calls.size());
    for (size_t i = 0; i < whole.tool_calls.size() && i < streamed.tool_calls.size(); ++i) {
      EXPECT_EQ(streamed.tool_calls[i]["function"], whole.tool_calls[i]["function"]);
    }
  }
  return whole;
}

TEST(ChatOutputParserTest, HermesCallsWithTextAround) {
  std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\\\"ürich\", "
      "\"n\": [1, {\"a\": \"}\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n"
      "</tool_call>";
  ParsedChatOutput p = ParseBothWays(Tools(ToolCallFormat::kHermes), text);
  EXPECT_EQ(p.content, "Let me check.\n");
  EXPECT_EQ(p.reasoning, "");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0]["type"], "function");
  EXPECT_EQ(p.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], R"({"city": "Z\"ürich", "n": [1, {"a": "}"}]})");
  EXPECT_EQ(p.tool_calls[1]["function"]["name"], "add");
  EXPECT_EQ(p.tool_calls[1]["function"]["arguments"], R"({"a": 2})");
  EXPECT_NE(p.tool_calls[0]["id"], p.tool_calls[1]["id"]);
  EXPECT_EQ(p.tool_calls[0]["id"].get<std::string>().size(), 5u + 24u);
}

TEST(ChatOutputParserTest, PartialTriggerIsHeldBackNotLeaked) {
  ChatOutputParser parser(Tools(ToolCallFormat::kHermes));
  auto d = parser.Feed("Hello <tool");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "Hello ");
  d = parser.Feed("_ca");
  EXPECT_TRUE(d.empty());
  d = parser.Feed("ll>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(d.empty());
  d = parser.Feed("ments\": {\"x\"");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, ChatDelta::Kind::kToolCallStart);
  EXPECT_EQ(d[0].text, "f");
  EXPECT_EQ(d[1].kind, ChatDelta::Kind::kToolArguments);
  EXPECT_EQ(d[1].text, "{\"x\"");
  d = parser.Feed(": 1}}\n</tool_call>");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, ": 1}");
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_EQ(parser.num_tool_calls(), 1);

  // Text that only looked like the start of a trigger is released.
  ChatOutputParser other(Tools(ToolCallFormat::kHermes));
  d = other.Feed("a <tool");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "a ");
  d = other.Feed("box> b");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "<toolbox> b");
  d = other.Feed("<");
  EXPECT_TRUE(d.empty());
  d = other.Finish();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "<");
  EXPECT_EQ(other.num_tool_calls(), 0);
}

TEST(ChatOutputParserTest, NoContentFragmentOfTheTriggerInAnyStreaming) {
  std::string text = "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  for (size_t step = 1; step <= text.size(); ++step) {
    std::vector<ChatDelta> deltas;
    ParsedChatOutput p = Streamed(Tools(ToolCallFormat::kHermes), text, step, &deltas);
    EXPECT_EQ(p.content, "Sure.");
    ASSERT_EQ(p.tool_calls.size(), 1u);
    EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], "{}");
    for (const ChatDelta& d : deltas) {
      if (d.kind == ChatDelta::Kind::kContent) {
        EXPECT_EQ(d.text.find('<'), std::string::npos) << d.text;
      }
    }
  }
}

TEST(ChatOutputParserTest, ThinkingIsReasoning) {
  ChatOutputOptions thinking = Tools(ToolCallFormat::kHermes, ThinkingMode::kOptional);
  ParsedChatOutput p = ParseBothWays(
      thinking, "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": "
                "{}}\n</tool_call>");
  EXPECT_EQ(p.reasoning, "\nThe user wants weather.\n");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  // A <tool_call> inside the thinking is thought, not a call.
  p = ParseBothWays(thinking, "<think>maybe <tool_call> later</think>\n\nNo call.");
  EXPECT_EQ(p.reasoning, "maybe <tool_call> later");
  EXPECT_EQ(p.content, "No call.");
  EXPECT_TRUE(p.tool_calls.empty());
  // No think block: all answer.
  p = ParseBothWays({false, ToolCallFormat::kHermes, ThinkingMode::kOptional}, "  Plain <think answer");
  EXPECT_EQ(p.content, "  Plain <think answer");
  // The prompt opened the block.
  p = ParseBothWays({false, ToolCallFormat::kHermes, ThinkingMode::kInside}, "hmm\n</think>\n\nAnswer.");
  EXPECT_EQ(p.reasoning, "hmm\n");
  EXPECT_EQ(p.content, "Answer.");
  // Cut off while thinking.
  p = ParseBothWays({false, ToolCallFormat::kHermes, ThinkingMode::kOptional}, "<think>still </thi");
  EXPECT_EQ(p.reasoning, "still </thi");
}

TEST(ChatOutputParserTest, LlamaJsonCalls) {
  ParsedChatOutput p = ParseBothWays(Tools(ToolCallFormat::kLlama3Json),
                                     "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1}}; "
                                     "{\"name\": \"mul\", \"parameters\": {\"b\": [2]}}");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], R"({"a": 1})");
  EXPECT_EQ(p.tool_calls[1]["function"]["name"], "mul");
  p = ParseBothWays(Tools(ToolCallFormat::kLlama3Json), "{\"name\": \"add\", \"parameters\": {}}");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], "{}");
  // Text after the python tag that is no call stays text, streamed or not.
  p = ParseBothWays(Tools(ToolCallFormat::kLlama3Json),
                    "<|python_tag|>_tag{\"{\"name\": \"add\", \"parame~ers\": {\"a\": 1}}");
  EXPECT_EQ(p.content, "<|python_tag|>_tag{\"");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], "{}");
  p = ParseBothWays(Tools(ToolCallFormat::kLlama3Json), "Just text {with braces}.");
  EXPECT_EQ(p.content, "Just text {with braces}.");
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(ChatOutputParserTest, MistralCallList) {
  ParsedChatOutput p = ParseBothWays(
      Tools(ToolCallFormat::kMistral),
      "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": \"]\"}}, {\"name\": \"b\", \"arguments\": {}}]");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], R"({"x": "]"})");
  EXPECT_EQ(p.tool_calls[1]["function"]["name"], "b");
}

TEST(ChatOutputParserTest, OtherKeyOrderIsReadWhole) {
  ParsedChatOutput p = ParseBothWays(Tools(ToolCallFormat::kHermes),
                                     "<tool_call>\n{\"arguments\": {\"q\": 1}, \"name\": \"s\"}\n</tool_call>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0]["function"]["name"], "s");
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], R"({"q":1})");
  // Not JSON at all: the text stays content.
  p = ParseBothWays(Tools(ToolCallFormat::kHermes), "<tool_call> oops");
  EXPECT_EQ(p.content, "<tool_call> oops");
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(ChatOutputParserTest, CutOffCalls) {
  // Cut in the arguments (max_tokens): the call keeps what came.
  ParsedChatOutput p = ParseBothWays(Tools(ToolCallFormat::kHermes),
                                     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"par");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], "{\"a\": \"par");
  // Cut before the name: dropped, and nothing of it is content.
  p = ParseBothWays(Tools(ToolCallFormat::kHermes), "Hi<tool_call>\n{\"na");
  EXPECT_EQ(p.content, "Hi");
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(ChatOutputParserTest, WithoutToolsEverythingIsContent) {
  ParsedChatOutput p =
      ParseBothWays({false, ToolCallFormat::kHermes, ThinkingMode::kNone}, "<tool_call>\n{\"name\": \"f\"}");
  EXPECT_EQ(p.content, "<tool_call>\n{\"name\": \"f\"}");
  EXPECT_TRUE(p.tool_calls.empty());
}

}  // namespace chat_output_parser_tests
}  // namespace kiln::server
