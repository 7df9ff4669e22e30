// Reading tools, tool_choice, parallel_tool_calls and the tool parts of
// messages, with the 400s that name the field.
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include "server/completion_request.h"

namespace kiln::server {
namespace tool_request_tests {

using nlohmann::json;
using OJson = nlohmann::ordered_json;

OJson Weather() {
  return OJson::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"]}}})");
}

TEST(ToolRequestTest, ReadsToolsChoiceAndParallel) {
  OJson body = {{"tools", OJson::array({Weather(), {{"type", "function"}, {"function", {{"name", "now"}}}}})},
                {"tool_choice", {{"type", "function"}, {"function", {{"name", "now"}}}}},
                {"parallel_tool_calls", false}};
  ToolRequest r;
  ASSERT_FALSE(ParseToolRequest(body, &r));
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather now.");
  // Keys keep the client's order.
  EXPECT_EQ(r.tools[0].parameters["properties"].begin().key(), "city");
  EXPECT_EQ(r.tools[1].parameters, OJson::object());
  EXPECT_EQ(r.choice, ToolChoiceMode::kNamed);
  EXPECT_EQ(r.choice_name, "now");
  EXPECT_FALSE(r.parallel);
  EXPECT_TRUE(r.active());
  EXPECT_EQ(r.tools_json.size(), 2u);

  for (const char* mode : {"auto", "none", "required"}) {
    ASSERT_FALSE(ParseToolRequest({{"tools", {Weather()}}, {"tool_choice", mode}}, &r));
    EXPECT_EQ(r.choice, std::string(mode) == "auto"   ? ToolChoiceMode::kAuto
                        : std::string(mode) == "none" ? ToolChoiceMode::kNone
                                                      : ToolChoiceMode::kRequired);
    EXPECT_TRUE(r.parallel);
    EXPECT_EQ(r.active(), std::string(mode) != "none");
  }
  ASSERT_FALSE(ParseToolRequest(OJson::object(), &r));
  EXPECT_FALSE(r.active());
  ASSERT_FALSE(ParseToolRequest({{"tool_choice", "none"}}, &r));
}

TEST(ToolRequestTest, BadFieldsAreNamed) {
  struct Bad {
    OJson body;
    std::string param;
    std::string words;
  };
  OJson no_name = {{"type", "function"}, {"function", {{"description", "x"}}}};
  OJson bad_params = Weather();
  bad_params["function"]["parameters"] = "a string";
  const Bad cases[] = {
      {{{"tools", "all"}}, "tools", "expected a list"},
      {{{"tools", {5}}}, "tools[0]", "expected an object"},
      {{{"tools", {no_name}}}, "tools[0].function.name", "is required"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "a b"}}}}}}}, "tools[0].function.name", "letters"},
      {{{"tools", {{{"type", "retrieval"}, {"function", {{"name", "a"}}}}}}}, "tools[0].type", "function"},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0].function", "is required"},
      {{{"tools", {Weather(), bad_params}}}, "tools[1].function.parameters", "JSON Schema object"},
      {{{"tools", {Weather(), Weather()}}}, "tools[1].function.name", "unique"},
      {{{"tools", {Weather()}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice",
       "not among the tools"},
      {{{"tools", {Weather()}}, {"tool_choice", "sometimes"}}, "tool_choice", "expected"},
      {{{"tools", {Weather()}}, {"tool_choice", 1}}, "tool_choice", "expected"},
      {{{"tool_choice", "required"}}, "tool_choice", "requires tools"},
      {{{"tools", {Weather()}}, {"parallel_tool_calls", "yes"}}, "parallel_tool_calls", "boolean"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.body.dump());
    ToolRequest r;
    ApiStatus e = ParseToolRequest(c.body, &r);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, c.param);
    EXPECT_NE(e->message.find(c.words), std::string::npos) << e->message;
    EXPECT_EQ(e->message.rfind(c.param, 0), 0u) << e->message;
  }
}

TEST(ToolRequestTest, ChatMessagesCarryToolCallsAndResults) {
  json body = json::parse(R"({"messages": [
    {"role": "user", "content": "Weather in Bern?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Bern\", \"unit\": \"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})");
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(body, &r));
  ASSERT_EQ(r.messages.size(), 3u);
  const OJson& call = r.messages[1]["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_1");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  // Arguments are handed to the template parsed, in the order written.
  EXPECT_EQ(call["function"]["arguments"].dump(), R"({"city":"Bern","unit":"c"})");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.messages[2]["role"], "tool");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
  EXPECT_EQ(r.messages[2]["content"], "sunny");
}

TEST(ToolRequestTest, MalformedToolMessagesAreNamed) {
  struct Bad {
    const char* messages;
    std::string param;
  };
  const Bad cases[] = {
      {R"([{"role": "assistant", "tool_calls": "x"}])", "messages[0].tool_calls"},
      {R"([{"role": "assistant", "tool_calls": [{"type": "function", "function": {"arguments": "{}"}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role": "user", "content": "x", "tool_calls": []}])", "messages[0].tool_calls"},
      {R"([{"role": "tool", "content": "x", "tool_call_id": 5}])", "messages[0].tool_call_id"},
      {R"([{"role": "tool"}])", "messages[0].content"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.messages);
    CompletionRequest r;
    ApiStatus e = ParseChatRequest({{"messages", json::parse(c.messages)}}, &r);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->param, c.param) << e->message;
  }
}

}  // namespace tool_request_tests
}  // namespace kiln::server
