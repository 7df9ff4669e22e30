// Reading chat and completions bodies: every honoured field, the 400 that
// names a field of the wrong type or out of range, prompt shapes, and the
// model's defaults for fields not given.
#include "server/completion_request.h"

#include <gtest/gtest.h>

namespace kiln::server {
namespace completion_request_tests {

using nlohmann::json;

ApiStatus Chat(const json& body, CompletionRequest* out) { return ParseChatRequest(body, out); }
ApiStatus Completion(const json& body, CompletionRequest* out) { return ParseCompletionRequest(body, out); }

json UserSays(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

TEST(CompletionRequestTest, ReadsEveryChatField) {
  json body = {{"model", "m"},
               {"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                         {{"role", "user"}, {"content", "Hi"}},
                                         {{"role", "assistant"}, {"content", nullptr}}})},
               {"max_tokens", 7},
               {"temperature", 0.5},
               {"top_p", 0.9},
               {"top_k", 40},
               {"min_p", 0.05},
               {"presence_penalty", 0.5},
               {"frequency_penalty", -0.5},
               {"repetition_penalty", 1.1},
               {"seed", 42},
               {"stop", "END"},
               {"n", 3},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"logprobs", true},
               {"top_logprobs", 2},
               {"some_future_field", {1, 2, 3}}};
  CompletionRequest r;
  ASSERT_FALSE(Chat(body, &r));
  EXPECT_EQ(r.endpoint, Endpoint::kChat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "Hi");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.params.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.params.top_p, 0.9);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_DOUBLE_EQ(r.params.min_p, 0.05);
  EXPECT_DOUBLE_EQ(r.params.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(r.params.frequency_penalty, -0.5);
  EXPECT_DOUBLE_EQ(r.params.repetition_penalty, 1.1);
  ASSERT_TRUE(r.params.seed.has_value());
  EXPECT_EQ(*r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 2);
  EXPECT_TRUE(r.params.Validate().ok());
}

TEST(CompletionRequestTest, FieldsNotGivenKeepTheModelDefaults) {
  CompletionRequest r;
  r.params.temperature = 0;  // e.g. generation_config.json says do_sample false
  r.params.top_k = 20;
  ASSERT_FALSE(Chat({{"messages", UserSays("x")}, {"temperature", nullptr}}, &r));
  EXPECT_DOUBLE_EQ(r.params.temperature, 0);
  EXPECT_EQ(r.params.top_k, 20);
  EXPECT_FALSE(r.max_tokens_given);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.model, "");
}

TEST(CompletionRequestTest, MaxCompletionTokensWinsOverMaxTokens) {
  CompletionRequest r;
  ASSERT_FALSE(Chat({{"messages", UserSays("x")}, {"max_tokens", 9}, {"max_completion_tokens", 4}}, &r));
  EXPECT_EQ(r.params.max_tokens, 4);
}

TEST(CompletionRequestTest, ContentPartsAreJoinedAndDeveloperIsSystem) {
  json messages = json::array(
      {{{"role", "developer"}, {"content", "rules"}},
       {{"role", "user"},
        {"content", json::array({{{"type", "text"}, {"text", "one"}}, {{"type", "text"}, {"text", "two"}}})}}});
  CompletionRequest r;
  ASSERT_FALSE(Chat({{"messages", messages}}, &r));
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "one\ntwo");
}

struct BadField {
  json body;
  std::string param;
  std::string words;  // expected in the message
};

TEST(CompletionRequestTest, BadChatFieldsAreRefusedNamingTheField) {
  json ok_messages = UserSays("x");
  auto with = [&](const char* field, json value) {
    json body = {{"messages", ok_messages}};
    body[field] = std::move(value);
    return body;
  };
  std::vector<BadField> cases = {
      {json::object(), "messages", "required"},
      {{{"messages", "hi"}}, "messages", "expected a list"},
      {{{"messages", json::array()}}, "messages", "must not be empty"},
      {{{"messages", json::array({"hi"})}}, "messages[0]", "expected an object"},
      {{{"messages", json::array({{{"content", "x"}}})}}, "messages[0].role", "required"},
      {{{"messages", json::array({{{"role", 3}, {"content", "x"}}})}}, "messages[0].role", "got number"},
      {{{"messages", json::array({{{"role", "function"}, {"content", "x"}}})}}, "messages[0].role", "function"},
      {{{"messages", json::array({{{"role", "user"}, {"content", 5}}})}}, "messages[0].content", "got number"},
      {{{"messages", json::array({{{"role", "user"}, {"content", nullptr}}})}}, "messages[0].content", "required"},
      {{{"messages", json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}})}},
       "messages[0].content[0].type", "only text"},
      {with("model", 5), "model", "expected a string, got number"},
      {with("temperature", "hot"), "temperature", "expected a number, got string"},
      {with("temperature", 2.5), "temperature", "[0, 2]"},
      {with("top_p", 0), "top_p", "(0, 1]"},
      {with("top_p", true), "top_p", "got boolean"},
      {with("top_k", 1.5), "top_k", "integer"},
      {with("top_k", -2), "top_k", "[-1,"},
      {with("min_p", 1.5), "min_p", "[0, 1]"},
      {with("presence_penalty", 3), "presence_penalty", "[-2, 2]"},
      {with("frequency_penalty", "1"), "frequency_penalty", "got string"},
      {with("repetition_penalty", 0), "repetition_penalty", "> 0"},
      {with("max_tokens", 0), "max_tokens", "[1,"},
      {with("max_tokens", "5"), "max_tokens", "got string"},
      {with("max_completion_tokens", -1), "max_completion_tokens", "[1,"},
      {with("seed", "abc"), "seed", "got string"},
      {with("seed", 1.5), "seed", "integer"},
      {with("n", 0), "n", "[1, 128]"},
      {with("n", 500), "n", "[1, 128]"},
      {with("stop", 5), "stop", "a string or a list of strings"},
      {with("stop", json::array({"a", 5})), "stop[1]", "expected a string"},
      {with("stop", json::array({""})), "stop", "must not be empty"},
      {with("stream", "yes"), "stream", "expected a boolean"},
      {with("stream_options", {{"include_usage", true}}), "stream_options", "only when stream is true"},
      {with("logprobs", 1), "logprobs", "expected a boolean"},
      {with("top_logprobs", 21), "top_logprobs", "[0, 20]"},
      {with("top_logprobs", 2), "top_logprobs", "needs logprobs"},
      {with("ignore_eos", 1), "ignore_eos", "boolean"},
      {with("logit_bias", {{"50256", -100}}), "logit_bias", "not supported"},
      {with("response_format", {{"type", "xml"}}), "response_format.type", "json_object or json_schema"},
  };
  for (const BadField& c : cases) {
    SCOPED_TRACE(c.body.dump());
    CompletionRequest r;
    ApiStatus e = Chat(c.body, &r);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, c.param);
    EXPECT_NE(e->message.find(c.words), std::string::npos) << e->message;
    EXPECT_EQ(e->type, "invalid_request_error");
  }
}

TEST(CompletionRequestTest, StreamOptionsWrongTypeNamesTheNestedField) {
  CompletionRequest r;
  ApiStatus e = Chat({{"messages", UserSays("x")}, {"stream", true}, {"stream_options", {{"include_usage", "y"}}}}, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "stream_options.include_usage");
}

TEST(CompletionRequestTest, ReadsEveryPromptShape) {
  CompletionRequest r;
  ASSERT_FALSE(Completion({{"prompt", "Once upon"}}, &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Once upon");
  ASSERT_FALSE(Completion({{"prompt", {"a", "b"}}}, &r));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].text, "b");
  ASSERT_FALSE(Completion({{"prompt", {1, 2, 3}}}, &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_FALSE(Completion({{"prompt", {{1, 2}, {3}}}}, &r));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].ids, std::vector<int32_t>{3});
}

TEST(CompletionRequestTest, BadPromptsAreRefused) {
  std::vector<BadField> cases = {
      {json::object(), "prompt", "required"},
      {{{"prompt", ""}}, "prompt", "must not be empty"},
      {{{"prompt", json::array()}}, "prompt", "must not be empty"},
      {{{"prompt", 5}}, "prompt", "got number"},
      {{{"prompt", {"a", 5}}}, "prompt[1]", "every item of one kind"},
      {{{"prompt", {1, -2}}}, "prompt[1]", "token ids must be in"},
      {{{"prompt", {1, 2.5}}}, "prompt[1]", "expected a token id"},
      {{{"prompt", {{1}, json::array()}}}, "prompt[1]", "must not be empty"},
      {{{"prompt", {"a", ""}}}, "prompt[1]", "must not be empty"},
      {{{"prompt", "x"}, {"logprobs", true}}, "logprobs", "integer"},
      {{{"prompt", "x"}, {"logprobs", 30}}, "logprobs", "[0, 20]"},
      {{{"prompt", "x"}, {"echo", "yes"}}, "echo", "boolean"},
      {{{"prompt", "x"}, {"suffix", "tail"}}, "suffix", "not supported"},
      {{{"prompt", json(std::vector<std::string>(129, "p"))}}, "prompt", "at most 128 prompts"},
      {{{"prompt", {"a", "b", "c"}}, {"n", 50}}, "n", "at most 128"},
  };
  for (const BadField& c : cases) {
    SCOPED_TRACE(c.body.dump());
    CompletionRequest r;
    ApiStatus e = Completion(c.body, &r);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, c.param);
    EXPECT_NE(e->message.find(c.words), std::string::npos) << e->message;
  }
}

TEST(CompletionRequestTest, LegacyLogprobsCountsAlternatives) {
  CompletionRequest r;
  ASSERT_FALSE(Completion({{"prompt", "x"}, {"logprobs", 3}, {"echo", true}}, &r));
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 3);
  EXPECT_TRUE(r.echo);
  ASSERT_FALSE(Completion({{"prompt", "x"}, {"logprobs", 0}}, &r));
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 0);
}

TEST(CompletionRequestTest, WholeNumbersWrittenAsFloatsAreIntegers) {
  CompletionRequest r;
  ASSERT_FALSE(Completion({{"prompt", {1.0, 2.0}}, {"max_tokens", 8.0}, {"seed", -1}}, &r));
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.params.max_tokens, 8);
  EXPECT_EQ(*r.params.seed, ~uint64_t{0});  // negative seeds are allowed, as OpenAI allows them
}

TEST(JsonBodyTest, MalformedBodiesAreNamed) {
  json out;
  ApiStatus e = ParseJsonObject("{\"a\": ", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("not valid JSON"), std::string::npos);
  e = ParseJsonObject("", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("empty"), std::string::npos);
  e = ParseJsonObject("[1, 2]", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("JSON object, got array"), std::string::npos);
  e = ParseJsonObject("{\"a\": \"\xff\"}", &out);  // not UTF-8
  ASSERT_TRUE(e.has_value());
  e = ParseJsonObject("{\"a\": 1e999}", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(ParseJsonObject(" {\"a\": [1, {\"b\": null}]} ", &out));
  // Deep nesting neither crashes nor recurses without bound.
  std::string deep(200000, '[');
  deep += std::string(200000, ']');
  e = ParseJsonObject(deep, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("got array"), std::string::npos);
}

}  // namespace completion_request_tests
}  // namespace kiln::server
