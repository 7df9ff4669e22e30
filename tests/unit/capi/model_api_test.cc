// The C API's basics and models: versions, status names, the per-thread
// error message, options structs, loading, tokenizing and chat prompts.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <thread>

#include "capi_test_util.h"

namespace kiln::capi_test {
namespace model_api_tests {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CApiBasics, VersionsAgreeWithTheHeader) {
  EXPECT_EQ(kiln_api_version(), KILN_API_VERSION);
  EXPECT_STREQ(kiln_version(), KILN_VERSION);
}

TEST(CApiBasics, EveryStatusAndFinishReasonHasAName) {
  EXPECT_STREQ(kiln_status_name(KILN_OK), "ok");
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_NOT_FOUND), "not found");
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_OUT_OF_MEMORY), "out of memory");
  for (int s = KILN_OK; s <= KILN_ERROR_OUT_OF_MEMORY; ++s) {
    EXPECT_STRNE(kiln_status_name(static_cast<kiln_status>(s)), "unknown status") << s;
  }
  EXPECT_STREQ(kiln_status_name(static_cast<kiln_status>(99)), "unknown status");
  EXPECT_STREQ(kiln_finish_reason_name(KILN_FINISH_STOP), "stop");
  EXPECT_STREQ(kiln_finish_reason_name(KILN_FINISH_LENGTH), "length");
  EXPECT_STREQ(kiln_finish_reason_name(KILN_FINISH_ABORT), "abort");
  EXPECT_STREQ(kiln_finish_reason_name(KILN_FINISH_ERROR), "error");
  EXPECT_STREQ(kiln_finish_reason_name(KILN_FINISH_NONE), "");
}

TEST(CApiBasics, TheLastErrorIsPerThreadAndSurvivesSuccess) {
  kiln_model* model = nullptr;
  ASSERT_EQ(kiln_model_load(nullptr, nullptr, &model), KILN_ERROR_INVALID_ARGUMENT);
  const std::string message = kiln_last_error();
  EXPECT_EQ(message, "kiln_model_load: path is NULL");
  std::string other_thread = "unset";
  std::thread([&] { other_thread = kiln_last_error(); }).join();
  EXPECT_EQ(other_thread, "");
  EXPECT_EQ(kiln_api_version(), KILN_API_VERSION);  // a call that cannot fail
  int32_t length = 0;
  EXPECT_EQ(kiln_session_seq_length(nullptr, 0, &length), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kiln_last_error()), "kiln_session_seq_length: session is NULL");
}

TEST(CApiBasics, InitWritesOnlyTheCallersStructSize) {
  // A program built against an older, shorter struct passes its own size.
  alignas(kiln_engine_options) unsigned char bytes[sizeof(kiln_engine_options)];
  std::memset(bytes, 0xAB, sizeof(bytes));
  const size_t old_size = offsetof(kiln_engine_options, kv_cache_memory_bytes);
  kiln_engine_options_init(reinterpret_cast<kiln_engine_options*>(bytes), old_size);
  size_t struct_size = 0;
  std::memcpy(&struct_size, bytes, sizeof(struct_size));
  EXPECT_EQ(struct_size, old_size);
  for (size_t i = old_size; i < sizeof(bytes); ++i) ASSERT_EQ(bytes[i], 0xAB) << i;

  kiln_engine_options full;
  kiln_engine_options_default(&full);
  EXPECT_EQ(full.struct_size, sizeof(full));
  EXPECT_EQ(full.max_num_seqs, 64);
  EXPECT_EQ(full.enable_prefix_caching, 1);
  kiln_sampling_params params;
  kiln_sampling_params_default(&params);
  EXPECT_EQ(params.temperature, 1.0);
  EXPECT_EQ(params.max_tokens, 16);
  EXPECT_EQ(params.seed, -1);
  EXPECT_EQ(params.skip_special_tokens, 1);
  kiln_request request;
  kiln_request_default(&request);
  EXPECT_EQ(request.add_special_tokens, 1);
  EXPECT_EQ(request.params, nullptr);
  kiln_session_options session;
  kiln_session_options_default(&session);
  EXPECT_EQ(session.max_batch_tokens, 512);
}

TEST(CApiBasics, AShorterOptionsStructLeavesTheRestAtTheDefaults) {
  kiln_engine_options options = TinyEngineOptions();
  options.max_num_seqs = 0;  // would be refused, but lies beyond struct_size
  options.struct_size = offsetof(kiln_engine_options, kv_cache_memory_bytes);
  kiln_engine* engine = nullptr;
  ASSERT_EQ(kiln_engine_create(SharedModel("tiny-qwen2"), &options, &engine), KILN_OK) << kiln_last_error();
  kiln_engine_destroy(engine);

  options.struct_size = 0;  // never filled in
  EXPECT_EQ(kiln_engine_create(SharedModel("tiny-qwen2"), &options, &engine), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options: struct_size is 0")) << kiln_last_error();
}

TEST(CApiModel, AMissingFileIsAnErrorNamingThePath) {
  const std::string path = ModelPath("no-such-model");
  kiln_model* model = reinterpret_cast<kiln_model*>(0x1);
  EXPECT_EQ(kiln_model_load(path.c_str(), nullptr, &model), KILN_ERROR_NOT_FOUND);
  EXPECT_EQ(model, reinterpret_cast<kiln_model*>(0x1)) << "outputs stay untouched on failure";
  const std::string message = kiln_last_error();
  EXPECT_TRUE(Contains(message, "kiln_model_load: ")) << message;
  EXPECT_TRUE(Contains(message, path)) << message;
}

TEST(CApiModel, BadLoadArgumentsAreNamed) {
  kiln_model* model = nullptr;
  EXPECT_EQ(kiln_model_load(ModelPath("tiny-qwen2").c_str(), nullptr, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "model (the output) is NULL")) << kiln_last_error();
  kiln_model_options options;
  kiln_model_options_default(&options);
  options.load_format = "pickle";
  EXPECT_EQ(kiln_model_load(ModelPath("tiny-qwen2").c_str(), &options, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.load_format 'pickle'")) << kiln_last_error();
  kiln_model_options_default(&options);
  options.load_format = "dummy";
  options.dummy_dtype = "q4";
  EXPECT_EQ(kiln_model_load(ModelPath("tiny-qwen2").c_str(), &options, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.dummy_dtype 'q4'")) << kiln_last_error();
}

TEST(CApiModel, GeneratedWeightsLoadWithoutAFolder) {
  kiln_model_options options;
  kiln_model_options_default(&options);
  options.load_format = "dummy";
  options.preset = "no-such-preset";
  kiln_model* model = nullptr;
  EXPECT_NE(kiln_model_load(nullptr, &options, &model), KILN_OK);
  EXPECT_TRUE(Contains(kiln_last_error(), "no-such-preset")) << kiln_last_error();

  options.tokenizer = nullptr;
  options.preset = nullptr;
  ASSERT_EQ(kiln_model_load(ModelPath("tiny-llama").c_str(), &options, &model), KILN_OK) << kiln_last_error();
  ModelPtr owned(model);
  EXPECT_EQ(kiln_model_vocab_size(model), 2048);
}

TEST(CApiModel, ReportsTheModelsFacts) {
  const kiln_model* qwen = SharedModel("tiny-qwen2");
  ASSERT_NE(qwen, nullptr);
  EXPECT_EQ(kiln_model_vocab_size(qwen), 2048);
  EXPECT_EQ(kiln_model_max_context(qwen), 1024);
  EXPECT_EQ(kiln_model_eos_id(qwen), 2045);
  EXPECT_EQ(kiln_model_has_tokenizer(qwen), 1);
  const kiln_model* llama = SharedModel("tiny-llama");
  EXPECT_EQ(kiln_model_bos_id(llama), 1);
  EXPECT_EQ(kiln_model_eos_id(llama), 2);
  EXPECT_EQ(kiln_model_vocab_size(nullptr), 0);
  EXPECT_EQ(kiln_model_bos_id(nullptr), -1);
}

TEST(CApiModel, DefaultSamplingParamsFollowTheGenerationConfig) {
  kiln_sampling_params params;
  kiln_model_default_sampling_params(SharedModel("tiny-qwen2"), &params);
  EXPECT_EQ(params.struct_size, sizeof(params));
  EXPECT_EQ(params.temperature, 0.0);  // do_sample: false
  EXPECT_EQ(params.max_tokens, 64);    // max_new_tokens
}

TEST(CApiModel, TokenizesAsTheReferenceDoes) {
  for (const char* name : {"tiny-qwen2", "tiny-llama"}) {
    nlohmann::json ref = Reference(name, 2);
    const std::string prompt = ref["prompt"];
    const auto expected = ref["input_ids"].get<std::vector<int32_t>>();
    const kiln_model* model = SharedModel(name);
    size_t count = 0;
    ASSERT_EQ(kiln_tokenize(model, prompt.data(), prompt.size(), 1, 1, nullptr, 0, &count), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(count, expected.size()) << name;
    std::vector<int32_t> ids(count + 2, -7);
    ASSERT_EQ(kiln_tokenize(model, prompt.data(), prompt.size(), 1, 1, ids.data(), ids.size(), &count),
              KILN_OK);
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count)), expected);
    EXPECT_EQ(ids[count], -7);  // nothing beyond

    // Too small a buffer: the count comes back, the buffer stays as it was.
    std::vector<int32_t> small(3, -7);
    EXPECT_EQ(kiln_tokenize(model, prompt.data(), prompt.size(), 1, 1, small.data(), small.size(), &count),
              KILN_ERROR_OUT_OF_RANGE);
    EXPECT_EQ(count, expected.size());
    EXPECT_EQ(small, std::vector<int32_t>(3, -7));
    EXPECT_TRUE(Contains(kiln_last_error(), "ids holds 3")) << kiln_last_error();
  }
}

TEST(CApiModel, SpecialTokensInTextAreParsedOnlyWhenAsked) {
  const kiln_model* model = SharedModel("tiny-qwen2");
  const std::string text = "<|im_end|>";
  int32_t ids[32];
  size_t count = 0;
  ASSERT_EQ(kiln_tokenize(model, text.data(), text.size(), 0, 1, ids, 32, &count), KILN_OK);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(ids[0], 2047);
  ASSERT_EQ(kiln_tokenize(model, text.data(), text.size(), 0, 0, ids, 32, &count), KILN_OK);
  EXPECT_GT(count, 1u);
}

TEST(CApiModel, DetokenizesAsTheReferenceDoes) {
  nlohmann::json ref = Reference("tiny-qwen2", 0);
  const auto ids = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();
  char* text = nullptr;
  ASSERT_EQ(kiln_detokenize(SharedModel("tiny-qwen2"), ids.data(), ids.size(), 1, &text), KILN_OK);
  StringPtr owned(text);
  EXPECT_EQ(std::string(text), ref["greedy"]["decoded_new"].get<std::string>());

  const int32_t bad[] = {5, 4096};
  EXPECT_EQ(kiln_detokenize(SharedModel("tiny-qwen2"), bad, 2, 1, &text), KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "ids[1] is 4096")) << kiln_last_error();
  EXPECT_EQ(kiln_detokenize(SharedModel("tiny-qwen2"), nullptr, 2, 1, &text), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "ids is NULL")) << kiln_last_error();
}

TEST(CApiModel, RendersChatPromptsWithTheModelsTemplate) {
  const kiln_model* model = SharedModel("tiny-qwen2");
  const kiln_chat_message messages[] = {{"system", "Be brief."}, {"user", "Hello"}};
  char* prompt = nullptr;
  ASSERT_EQ(kiln_chat_render(model, messages, 2, &prompt), KILN_OK) << kiln_last_error();
  StringPtr owned(prompt);
  EXPECT_EQ(
      std::string(prompt),
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");

  char* from_json = nullptr;
  ASSERT_EQ(
      kiln_chat_render_json(
          model, R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}])",
          &from_json),
      KILN_OK)
      << kiln_last_error();
  StringPtr owned_json(from_json);
  EXPECT_STREQ(from_json, prompt);
}

TEST(CApiModel, ChatErrorsAreNamed) {
  const kiln_chat_message messages[] = {{"user", nullptr}};
  char* prompt = nullptr;
  EXPECT_EQ(kiln_chat_render(SharedModel("tiny-qwen2"), messages, 1, &prompt), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "messages[0].content is NULL")) << kiln_last_error();
  EXPECT_EQ(kiln_chat_render_json(SharedModel("tiny-qwen2"), "[{\"role\": ", &prompt),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "not valid JSON")) << kiln_last_error();
  EXPECT_EQ(kiln_chat_render_json(SharedModel("tiny-qwen2"), "{\"role\": \"user\"}", &prompt),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "must be a JSON array")) << kiln_last_error();
  std::string deep(100000, '[');
  EXPECT_EQ(kiln_chat_render_json(SharedModel("tiny-qwen2"), deep.c_str(), &prompt),
            KILN_ERROR_INVALID_ARGUMENT);

  const kiln_chat_message hello[] = {{"user", "Hello"}};
  EXPECT_EQ(kiln_chat_render(SharedModel("tiny-llama"), hello, 1, &prompt), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "no chat template")) << kiln_last_error();
}

}  // namespace model_api_tests
}  // namespace kiln::capi_test
