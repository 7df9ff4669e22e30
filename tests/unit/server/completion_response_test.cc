// OpenAI response shapes: whole responses and stream chunks of both
// endpoints, usage, finish reasons, log-probabilities in the chat and the
// legacy forms, and the SSE framing of each event.
#include "server/completion_response.h"

#include <gtest/gtest.h>

#include "server/sse.h"
#include "testing/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace kiln::server {
namespace completion_response_tests {

using Json = nlohmann::ordered_json;

std::unique_ptr<Tokenizer> TinyTokenizer() {
  auto tokenizer = LoadTokenizer(testing::ModelDir("tiny-qwen2"));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

TEST(CompletionResponseTest, ChatCompletionHasTheOpenAiShape) {
  ResponseFormatter f(Endpoint::kChat, "chatcmpl-1", 1700000000, "tiny", nullptr, false);
  ChoiceOutput a{"Hello", {1, 2}, {}, {}, FinishReason::kStop};
  ChoiceOutput b{"Hel", {1}, {}, {}, FinishReason::kLength};
  Json j = f.Complete({a, b}, Usage{5, 3, 2});
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"], Json({{"role", "assistant"}, {"content", "Hello"}}));
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 8);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST(CompletionResponseTest, TextCompletionHasTheOpenAiShape) {
  ResponseFormatter f(Endpoint::kCompletion, "cmpl-1", 1, "tiny", nullptr, false);
  Json j = f.Complete({ChoiceOutput{" world", {7}, {}, {}, FinishReason::kLength}}, Usage{1, 1, 0});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], " world");
  EXPECT_FALSE(j["choices"][0].contains("message"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST(CompletionResponseTest, ChatChunksFollowTheStreamingShape) {
  ResponseFormatter f(Endpoint::kChat, "chatcmpl-2", 1, "tiny", nullptr, false);
  Json role = f.RoleChunk(0);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(role.contains("usage"));
  Json text = f.TextChunk(1, "Hi", nullptr);
  EXPECT_EQ(text["choices"][0]["index"], 1);
  EXPECT_EQ(text["choices"][0]["delta"], Json({{"content", "Hi"}}));
  Json finish = f.FinishChunk(1, FinishReason::kStop);
  EXPECT_EQ(finish["choices"][0]["delta"], Json::object());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");

  f.set_usage_null_in_chunks(true);
  EXPECT_TRUE(f.TextChunk(0, "x", nullptr)["usage"].is_null());
  EXPECT_TRUE(f.TextChunk(0, "x", nullptr).contains("usage"));
  Json usage = f.UsageChunk(Usage{4, 6, 0});
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 10);
}

TEST(CompletionResponseTest, CompletionChunksCarryText) {
  ResponseFormatter f(Endpoint::kCompletion, "cmpl-2", 1, "tiny", nullptr, false);
  Json text = f.TextChunk(0, " the", nullptr);
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], " the");
  Json finish = f.FinishChunk(0, FinishReason::kLength);
  EXPECT_EQ(finish["choices"][0]["text"], "");
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
}

TEST(CompletionResponseTest, ChatLogprobsListTokensWithBytesAndAlternatives) {
  auto tokenizer = TinyTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::vector<int32_t> ids = tokenizer->Encode(" the king", false);
  ASSERT_EQ(ids.size(), 2u);
  ResponseFormatter f(Endpoint::kChat, "chatcmpl-3", 1, "tiny", tokenizer.get(), true);
  ChoiceOutput c{" the king", ids, {-0.5f, -1.5f}, {{{ids[0], -0.5f}, {ids[1], -2.0f}}, {{ids[1], -1.5f}}},
                 FinishReason::kLength};
  Json j = f.Complete({c}, Usage{});
  const Json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], " the");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(content[0]["bytes"], Json({32, 116, 104, 101}));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], " king");
  EXPECT_FLOAT_EQ(content[0]["top_logprobs"][1]["logprob"].get<float>(), -2.0f);
  EXPECT_EQ(content[1]["token"], " king");

  TokenLogprobs one{{ids[1]}, {-1.5f}, {{}}, 0};
  Json chunk = f.TextChunk(0, " king", &one);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["content"][0]["token"], " king");
}

TEST(CompletionResponseTest, LegacyLogprobsAreParallelListsWithOffsets) {
  auto tokenizer = TinyTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  std::vector<int32_t> ids = tokenizer->Encode(" the king", false);
  ResponseFormatter f(Endpoint::kCompletion, "cmpl-3", 1, "tiny", tokenizer.get(), true);
  ChoiceOutput c{" the king", ids, {-0.5f, -1.5f}, {{{ids[0], -0.5f}}, {{ids[1], -1.5f}}}, FinishReason::kLength};
  Json whole = f.Complete({c}, Usage{});
  const Json& lp = whole["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({" the", " king"}));
  EXPECT_EQ(lp["text_offset"], Json({0, 4}));
  ASSERT_EQ(lp["token_logprobs"].size(), 2u);
  EXPECT_FLOAT_EQ(lp["top_logprobs"][1][" king"].get<float>(), -1.5f);

  // With no alternatives asked for, top_logprobs is null.
  ChoiceOutput bare{" the", {ids[0]}, {-0.5f}, {{}}, FinishReason::kLength};
  EXPECT_TRUE(f.Complete({bare}, Usage{})["choices"][0]["logprobs"]["top_logprobs"].is_null());
}

TEST(SseTest, EventsAreOneDataLineAndABlankLine) {
  Json payload = {{"text", "line one\nline two"}, {"n", 1}};
  std::string event = SseEvent(payload);
  EXPECT_EQ(event, "data: {\"text\":\"line one\\nline two\",\"n\":1}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
  // Bytes that are not UTF-8 are replaced, not thrown.
  EXPECT_EQ(JsonText(Json("a\xff")), "\"a\xef\xbf\xbd\"");
}

}  // namespace completion_response_tests
}  // namespace kiln::server
