// Tool calls and reasoning in the OpenAI response shapes: the whole
// message (content null beside calls, finish_reason "tool_calls") and the
// streamed deltas (a call's first chunk with its id, type and name and
// arguments "", then argument fragments).
#include <gtest/gtest.h>

#include "server/chat_output_parser.h"
#include "server/completion_response.h"

namespace kiln::server {
namespace tool_call_response_tests {

using Json = nlohmann::ordered_json;

const ChatOutputOptions kHermesThinking{true, ToolCallFormat::kHermes, ThinkingMode::kOptional};

TEST(ToolCallResponseTest, MessageCarriesCallsAndReasoning) {
  ResponseFormatter f(Endpoint::kChat, "chatcmpl-1", 1, "tiny", nullptr, false);
  ChoiceOutput calls;
  calls.finish_reason = FinishReason::kStop;
  calls.parsed = ParseChatOutput(
      kHermesThinking, "<think>hm</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  ChoiceOutput cut = calls;
  cut.finish_reason = FinishReason::kLength;
  ChoiceOutput text;
  text.finish_reason = FinishReason::kStop;
  text.parsed = ParseChatOutput(kHermesThinking, "Just text.");
  Json j = f.Complete({calls, cut, text}, Usage{});
  const Json& m = j["choices"][0]["message"];
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["reasoning_content"], "hm");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"], Json({{"name", "f"}, {"arguments", "{\"a\": 1}"}}));
  EXPECT_EQ(Json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()), Json({{"a", 1}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][2]["message"], Json({{"role", "assistant"}, {"content", "Just text."}}));
  EXPECT_EQ(j["choices"][2]["finish_reason"], "stop");
}

TEST(ToolCallResponseTest, StreamedCallsFollowOpenAiChunks) {
  ResponseFormatter f(Endpoint::kChat, "chatcmpl-1", 1, "tiny", nullptr, false);
  ChatOutputParser parser(kHermesThinking);
  std::vector<Json> chunks;
  const std::string reply =
      "<think>x</think>Ok.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
  for (size_t i = 0; i < reply.size(); i += 3) {
    for (Json& c : f.DeltaChunks(0, parser.Feed(reply.substr(i, 3)), nullptr)) chunks.push_back(std::move(c));
  }
  for (Json& c : f.DeltaChunks(0, parser.Finish(), nullptr)) chunks.push_back(std::move(c));
  chunks.push_back(f.FinishChunk(0, FinishReason::kStop, parser.num_tool_calls() > 0));

  std::string reasoning, content;
  std::vector<std::string> names, ids, args;
  for (const Json& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    const Json& delta = c["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    const Json& call = delta["tool_calls"][0];
    size_t index = call["index"].get<size_t>();
    if (call.contains("id")) {
      EXPECT_EQ(index, names.size());
      EXPECT_EQ(call["type"], "function");
      EXPECT_EQ(call["function"]["arguments"], "");
      names.push_back(call["function"]["name"]);
      ids.push_back(call["id"]);
      args.emplace_back();
    } else {
      ASSERT_LT(index, args.size());
      EXPECT_FALSE(call["function"].contains("name"));
      std::string fragment = call["function"]["arguments"];
      EXPECT_FALSE(fragment.empty());
      args[index] += fragment;
    }
  }
  EXPECT_EQ(reasoning, "x");
  EXPECT_EQ(content, "Ok.");
  EXPECT_EQ(names, (std::vector<std::string>{"f", "g"}));
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_EQ(args, (std::vector<std::string>{"{\"a\": [1, 2]}", "{}"}));
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(chunks.back()["choices"][0]["delta"], Json::object());
}

}  // namespace tool_call_response_tests
}  // namespace kiln::server
