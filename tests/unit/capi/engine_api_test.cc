// The C API's engines: greedy output against the references and `kiln
// generate`, streaming, aborts from a callback and from another thread,
// requests from several threads at once, and errors naming their cause.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "capi_test_util.h"
#include "engine/model_artifact.h"
#include "testing/test_paths.h"

namespace kiln::capi_test {
namespace engine_api_tests {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CApiEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kiln_set_log_level(KILN_LOG_WARN);
    engine_ = CreateEngine(SharedModel("tiny-qwen2")).release();
  }
  static void TearDownTestSuite() { kiln_engine_destroy(engine_); }

  static CompletionPtr Generate(const std::string& prompt, const kiln_sampling_params& params) {
    kiln_completion* c = nullptr;
    kiln_status s = kiln_generate(engine_, prompt.c_str(), &params, &c);
    EXPECT_EQ(s, KILN_OK) << kiln_last_error();
    return CompletionPtr(c);
  }

  static kiln_engine* engine_;
};
kiln_engine* CApiEngine::engine_ = nullptr;

TEST_F(CApiEngine, GreedyOutputMatchesTheReference) {
  for (int prompt = 0; prompt < 3; ++prompt) {
    nlohmann::json ref = Reference("tiny-qwen2", prompt);
    CompletionPtr c = Generate(ref["prompt"], Greedy(64));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(Ids(*c), ref["greedy"]["new_ids"].get<std::vector<int32_t>>()) << prompt;
    EXPECT_EQ(Text(*c), ref["greedy"]["decoded_new"].get<std::string>()) << prompt;
    EXPECT_EQ(std::vector<int32_t>(c->prompt_token_ids, c->prompt_token_ids + c->num_prompt_tokens),
              ref["input_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(c->finish_reason, KILN_FINISH_LENGTH);
    EXPECT_EQ(std::strlen(c->text), c->text_len);
    EXPECT_GE(c->time_to_first_token, 0);
    EXPECT_EQ(c->logprobs, nullptr);
  }
}

std::string ShellQuote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `kiln generate` and returns its stdout.
std::string RunKilnGenerate(const std::vector<std::string>& args) {
  const std::string out = testing::MakeTempDir() + "/out.txt";
  std::string cmd = ShellQuote(testing::KilnBinary()) + " generate";
  for (const std::string& a : args) cmd += " " + ShellQuote(a);
  cmd += " >" + ShellQuote(out) + " 2>/dev/null";
  int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  std::ifstream f(out, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(CApiGenerate, EqualsKilnGenerateWithTheSameOptions) {
  // Default precision on both sides, so this is the engine as users run it.
  kiln_engine_options options;
  kiln_engine_options_default(&options);
  options.threads = 2;
  EnginePtr engine = CreateEngine(SharedModel("tiny-qwen2"), options);
  const std::string prompt = Reference("tiny-qwen2", 1)["prompt"];
  kiln_sampling_params params = Greedy(40, /*ignore_eos=*/false);
  kiln_completion* c = nullptr;
  ASSERT_EQ(kiln_generate(engine.get(), prompt.c_str(), &params, &c), KILN_OK) << kiln_last_error();
  CompletionPtr owned(c);
  const std::string cli = RunKilnGenerate(
      {"-m", ModelPath("tiny-qwen2"), "-p", prompt, "-n", "40", "--temperature", "0", "--threads", "2"});
  EXPECT_EQ(Text(*c) + "\n", cli);
  EXPECT_GT(c->num_tokens, 10u);
}

// A compiled artifact loads through kiln_model_load and generates what its
// source model does; an option that disagrees with the artifact is named.
TEST(CApiArtifact, ACompiledArtifactGeneratesWhatItsSourceDoes) {
  EngineOptions compile;
  compile.model = ModelPath("tiny-qwen2");
  compile.max_model_len = 256;
  // Not in MakeTempDir(), which RunKilnGenerate empties.
  const std::string dir = testing::BinaryDir() + "/test_tmp/capi_artifact." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string artifact = dir + "/qwen2.kiln";
  auto written = CompileArtifact(compile, artifact);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  kiln_model* loaded = nullptr;
  ASSERT_EQ(kiln_model_load(artifact.c_str(), nullptr, &loaded), KILN_OK) << kiln_last_error();
  ModelPtr model(loaded);
  kiln_engine_options options;
  kiln_engine_options_default(&options);
  options.threads = 2;
  EnginePtr engine = CreateEngine(model.get(), options);
  ASSERT_NE(engine, nullptr);
  const std::string prompt = Reference("tiny-qwen2", 1)["prompt"];
  kiln_sampling_params params = Greedy(24);
  kiln_completion* c = nullptr;
  ASSERT_EQ(kiln_generate(engine.get(), prompt.c_str(), &params, &c), KILN_OK) << kiln_last_error();
  CompletionPtr owned(c);
  const std::string cli = RunKilnGenerate({"-m", ModelPath("tiny-qwen2"), "-p", prompt, "-n", "24", "--temperature",
                                           "0", "--ignore-eos", "--threads", "2", "--max-model-len", "256"});
  EXPECT_EQ(Text(*c) + "\n", cli);

  options.kv_cache_dtype = "f16";
  kiln_engine* other = nullptr;
  EXPECT_NE(kiln_engine_create(model.get(), &options, &other), KILN_OK);
  EXPECT_TRUE(Contains(kiln_last_error(), "--kv-cache-dtype")) << kiln_last_error();
}

struct StreamLog {
  std::vector<kiln_token_event> events;
  std::vector<std::string> texts;
  int stop_after = -1;  // tokens before asking to stop; -1: never
};

int Record(const kiln_token_event* event, void* user_data) {
  auto* log = static_cast<StreamLog*>(user_data);
  log->events.push_back(*event);
  log->texts.emplace_back(event->text, event->text_len);
  EXPECT_EQ(std::strlen(event->text), event->text_len);
  return log->stop_after >= 0 && static_cast<int>(log->events.size()) >= log->stop_after ? 1 : 0;
}

TEST_F(CApiEngine, StreamsTheSameTextPieceByPiece) {
  nlohmann::json ref = Reference("tiny-qwen2", 2);  // non-ASCII: characters span tokens
  kiln_sampling_params params = Greedy(64);
  params.logprobs = 1;
  StreamLog log;
  kiln_completion* c = nullptr;
  ASSERT_EQ(
      kiln_generate_stream(engine_, ref["prompt"].get<std::string>().c_str(), &params, Record, &log, &c),
      KILN_OK)
      << kiln_last_error();
  CompletionPtr owned(c);
  ASSERT_EQ(log.events.size(), 64u);
  std::string joined;
  for (size_t i = 0; i < log.events.size(); ++i) {
    joined += log.texts[i];
    EXPECT_EQ(log.events[i].request_id, c->request_id);
    EXPECT_EQ(log.events[i].token, c->token_ids[i]);
    EXPECT_EQ(log.events[i].finished, i + 1 == log.events.size() ? 1 : 0);
    EXPECT_EQ(log.events[i].logprob, c->logprobs[i]);
    EXPECT_LE(c->logprobs[i], 0.0f);
  }
  EXPECT_EQ(log.events.back().finish_reason, KILN_FINISH_LENGTH);
  EXPECT_EQ(joined, Text(*c));
  EXPECT_EQ(joined, ref["greedy"]["decoded_new"].get<std::string>());

  // Without a completion pointer, only the stream.
  StreamLog again;
  ASSERT_EQ(kiln_generate_stream(engine_, ref["prompt"].get<std::string>().c_str(), &params, Record, &again,
                                 nullptr),
            KILN_OK);
  EXPECT_EQ(again.texts, log.texts);
}

TEST_F(CApiEngine, ACallbackReturningNonZeroAbortsItsRequest) {
  StreamLog log;
  log.stop_after = 3;
  kiln_sampling_params params = Greedy(50);
  kiln_completion* c = nullptr;
  ASSERT_EQ(kiln_generate_stream(engine_, "And God said", &params, Record, &log, &c), KILN_OK)
      << kiln_last_error();
  CompletionPtr owned(c);
  EXPECT_EQ(c->finish_reason, KILN_FINISH_ABORT);
  EXPECT_EQ(c->num_tokens, 3u);
  ASSERT_EQ(log.events.size(), 4u);  // three tokens, then the end
  EXPECT_EQ(log.events[3].token, -1);
  EXPECT_EQ(log.events[3].finished, 1);
  EXPECT_EQ(log.events[3].finish_reason, KILN_FINISH_ABORT);
}

// Holds the engine's thread at the first token until the test lets go.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool first_token = false;
  bool released = false;
};

int HoldAtFirstToken(const kiln_token_event* event, void* user_data) {
  auto* gate = static_cast<Gate*>(user_data);
  std::unique_lock<std::mutex> lock(gate->mu);
  if (!gate->first_token) {
    gate->first_token = true;
    gate->cv.notify_all();
    gate->cv.wait(lock, [&] { return gate->released; });
  }
  return 0;
}

TEST_F(CApiEngine, AnotherThreadAbortsABlockingRequestById) {
  Gate gate;
  kiln_sampling_params params = Greedy(500);
  kiln_request request;
  kiln_request_default(&request);
  request.prompt = "And God said";
  request.params = &params;
  request.on_token = HoldAtFirstToken;
  request.user_data = &gate;
  int64_t id = -1;
  ASSERT_EQ(kiln_engine_add_request(engine_, &request, &id), KILN_OK) << kiln_last_error();

  kiln_status abort_status = KILN_ERROR_INTERNAL;
  std::thread aborter([&] {
    std::unique_lock<std::mutex> lock(gate.mu);
    gate.cv.wait(lock, [&] { return gate.first_token; });
    abort_status = kiln_engine_abort(engine_, id);
    gate.released = true;
    gate.cv.notify_all();
  });
  kiln_completion* c = nullptr;
  kiln_status wait_status = kiln_engine_wait(engine_, id, &c);
  aborter.join();
  ASSERT_EQ(wait_status, KILN_OK) << kiln_last_error();
  CompletionPtr owned(c);
  EXPECT_EQ(abort_status, KILN_OK);
  EXPECT_EQ(c->request_id, id);
  EXPECT_EQ(c->finish_reason, KILN_FINISH_ABORT);
  EXPECT_EQ(c->num_tokens, 1u);  // the abort lands at the step after the first token

  // The result is collected: the id is gone.
  EXPECT_EQ(kiln_engine_abort(engine_, id), KILN_ERROR_NOT_FOUND);
  EXPECT_EQ(kiln_engine_wait(engine_, id, &c), KILN_ERROR_NOT_FOUND);
  EXPECT_TRUE(Contains(kiln_last_error(), "already collected")) << kiln_last_error();
}

TEST_F(CApiEngine, RequestsFromManyThreadsEachGetTheirOwnResult) {
  std::vector<nlohmann::json> refs;
  for (int p = 0; p < 4; ++p) refs.push_back(Reference("tiny-qwen2", p));
  std::vector<std::vector<int32_t>> got(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      kiln_sampling_params params = Greedy(24);
      kiln_completion* c = nullptr;
      if (kiln_generate(engine_, refs[t % 4]["prompt"].get<std::string>().c_str(), &params, &c) == KILN_OK) {
        got[t] = Ids(*c);
        kiln_completion_free(c);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < got.size(); ++t) {
    auto expected = refs[t % 4]["greedy"]["new_ids"].get<std::vector<int32_t>>();
    expected.resize(24);
    EXPECT_EQ(got[t], expected) << "thread " << t;
  }
}

TEST_F(CApiEngine, RequestsTakeTokenIdsAndSamplingOptions) {
  nlohmann::json ref = Reference("tiny-qwen2", 0);
  const auto prompt_ids = ref["input_ids"].get<std::vector<int32_t>>();
  const auto greedy = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();
  kiln_sampling_params params = Greedy(64);
  // An extra stop id: the first token from the 10th on not seen before it.
  size_t stop_at = 10;
  while (stop_at < greedy.size() &&
         std::count(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(stop_at), greedy[stop_at]) >
             0) {
    ++stop_at;
  }
  ASSERT_LT(stop_at, greedy.size());
  params.stop_token_ids = &greedy[stop_at];
  params.num_stop_token_ids = 1;
  kiln_request request;
  kiln_request_default(&request);
  request.prompt_ids = prompt_ids.data();
  request.num_prompt_ids = prompt_ids.size();
  request.params = &params;
  int64_t id = -1;
  ASSERT_EQ(kiln_engine_add_request(engine_, &request, &id), KILN_OK) << kiln_last_error();
  kiln_completion* c = nullptr;
  ASSERT_EQ(kiln_engine_wait(engine_, id, &c), KILN_OK) << kiln_last_error();
  CompletionPtr owned(c);
  EXPECT_EQ(c->finish_reason, KILN_FINISH_STOP);
  EXPECT_EQ(Ids(*c),
            std::vector<int32_t>(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(stop_at) + 1));

  // A stop string ends the text before it.
  const std::string full = ref["greedy"]["decoded_new"];
  const char* stops[] = {"morning"};
  kiln_sampling_params with_stop = Greedy(64);
  with_stop.stop = stops;
  with_stop.num_stop = 1;
  CompletionPtr stopped = Generate(ref["prompt"], with_stop);
  ASSERT_NE(stopped, nullptr);
  EXPECT_EQ(stopped->finish_reason, KILN_FINISH_STOP);
  EXPECT_EQ(Text(*stopped), full.substr(0, full.find("morning")));
}

TEST_F(CApiEngine, RequestsStayUntilCollected) {
  kiln_sampling_params params = Greedy(4);
  kiln_request request;
  kiln_request_default(&request);
  request.prompt = "In the beginning";
  request.params = &params;
  int64_t first = -1, second = -1;
  ASSERT_EQ(kiln_engine_add_request(engine_, &request, &first), KILN_OK);
  ASSERT_EQ(kiln_engine_add_request(engine_, &request, &second), KILN_OK);
  EXPECT_NE(first, second);
  kiln_completion* a = nullptr;
  kiln_completion* b = nullptr;
  ASSERT_EQ(kiln_engine_wait(engine_, second, &b), KILN_OK);  // runs both
  EXPECT_EQ(kiln_engine_abort(engine_, first), KILN_OK);      // finished: nothing to do
  ASSERT_EQ(kiln_engine_wait(engine_, first, &a), KILN_OK);
  CompletionPtr owned_a(a), owned_b(b);
  EXPECT_EQ(a->finish_reason, KILN_FINISH_LENGTH);
  EXPECT_EQ(Ids(*a), Ids(*b));
}

struct NestedWait {
  kiln_engine* engine = nullptr;
  kiln_status status = KILN_OK;
  std::string message;
};

int WaitInsideCallback(const kiln_token_event* event, void* user_data) {
  auto* nested = static_cast<NestedWait*>(user_data);
  if (event->finished) return 0;
  kiln_completion* c = nullptr;
  nested->status = kiln_engine_wait(nested->engine, event->request_id, &c);
  nested->message = kiln_last_error();
  return 0;
}

TEST_F(CApiEngine, WaitingInsideACallbackIsRefused) {
  NestedWait nested;
  nested.engine = engine_;
  kiln_sampling_params params = Greedy(2);
  kiln_completion* c = nullptr;
  ASSERT_EQ(kiln_generate_stream(engine_, "And", &params, WaitInsideCallback, &nested, &c), KILN_OK);
  CompletionPtr owned(c);
  EXPECT_EQ(nested.status, KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(nested.message, "inside a callback")) << nested.message;
}

TEST_F(CApiEngine, StructuredOutputHoldsTheSchemaOrGrammar) {
  kiln_sampling_params params = Greedy(200);
  params.temperature = 1;
  params.seed = 7;
  params.json_schema = R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                           "additionalProperties": false})";
  CompletionPtr c = Generate("Answer:", params);
  ASSERT_NE(c, nullptr);
  std::string text = Text(*c);
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(json.is_object()) << text;
  EXPECT_TRUE(json["ok"].is_boolean()) << text;

  params.json_schema = nullptr;
  params.grammar = "root ::= [0-9]{3}";
  c = Generate("Answer:", params);
  ASSERT_NE(c, nullptr);
  text = Text(*c);
  EXPECT_EQ(text.size(), 3u) << text;
  EXPECT_EQ(text.find_first_not_of("0123456789"), std::string::npos) << text;

  kiln_completion* none = nullptr;
  params.grammar = "root ::= missing-rule";
  EXPECT_EQ(kiln_generate(engine_, "Answer:", &params, &none), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "grammar: ")) << kiln_last_error();
  params.grammar = nullptr;
  params.json_schema = R"({"type": "string", "format": "ipv6"})";
  EXPECT_EQ(kiln_generate(engine_, "Answer:", &params, &none), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "json_schema: ")) << kiln_last_error();
  EXPECT_EQ(none, nullptr);
}

TEST_F(CApiEngine, BadArgumentsAreErrorsNamingThem) {
  kiln_completion* c = nullptr;
  kiln_sampling_params params = Greedy(8);
  params.temperature = -1;
  EXPECT_EQ(kiln_generate(engine_, "Hello", &params, &c), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "kiln_generate: params: temperature")) << kiln_last_error();
  EXPECT_EQ(c, nullptr);

  params = Greedy(8);
  const char* stops[] = {"a", nullptr};
  params.stop = stops;
  params.num_stop = 2;
  EXPECT_EQ(kiln_generate(engine_, "Hello", &params, &c), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "params.stop[1] is NULL")) << kiln_last_error();

  params = Greedy(2000);
  EXPECT_EQ(kiln_generate(engine_, "Hello", &params, &c), KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "max_tokens 2000 exceeds the context")) << kiln_last_error();

  params = Greedy(8);
  EXPECT_EQ(kiln_generate(engine_, nullptr, &params, &c), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "prompt is NULL")) << kiln_last_error();
  EXPECT_EQ(kiln_generate(engine_, "", &params, &c), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "prompt is empty")) << kiln_last_error();
  EXPECT_EQ(kiln_generate(nullptr, "Hello", &params, &c), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "engine is NULL")) << kiln_last_error();

  const int32_t ids[] = {1, 5000};
  kiln_request request;
  kiln_request_default(&request);
  request.prompt_ids = ids;
  request.num_prompt_ids = 2;
  int64_t id = -1;
  EXPECT_EQ(kiln_engine_add_request(engine_, &request, &id), KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "id 5000")) << kiln_last_error();
  EXPECT_EQ(id, -1);
  request.struct_size = 3;
  EXPECT_EQ(kiln_engine_add_request(engine_, &request, &id), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "request: struct_size is 3")) << kiln_last_error();
  EXPECT_EQ(kiln_generate_stream(engine_, "Hello", nullptr, nullptr, nullptr, nullptr),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "on_token is NULL")) << kiln_last_error();
  EXPECT_EQ(kiln_engine_wait(engine_, 123456, &c), KILN_ERROR_NOT_FOUND);
  EXPECT_TRUE(Contains(kiln_last_error(), "request 123456")) << kiln_last_error();
}

TEST(CApiEngineOptions, NgramSpeculationKeepsTheGreedyOutput) {
  kiln_engine_options options = TinyEngineOptions();
  options.spec_method = "ngram";
  options.spec_tokens = 6;
  EnginePtr engine = CreateEngine(SharedModel("tiny-qwen2"), options);
  ASSERT_NE(engine, nullptr);
  for (int prompt = 0; prompt < 2; ++prompt) {
    nlohmann::json ref = Reference("tiny-qwen2", prompt);
    // The prompt twice: the second copy and the output can quote the first.
    const std::string text = ref["prompt"].get<std::string>() + " " + ref["prompt"].get<std::string>();
    kiln_sampling_params params = Greedy(48);
    kiln_completion* speculative = nullptr;
    ASSERT_EQ(kiln_generate(engine.get(), text.c_str(), &params, &speculative), KILN_OK) << kiln_last_error();
    CompletionPtr owned(speculative);
    EnginePtr plain_engine = CreateEngine(SharedModel("tiny-qwen2"));
    kiln_completion* plain = nullptr;
    ASSERT_EQ(kiln_generate(plain_engine.get(), text.c_str(), &params, &plain), KILN_OK) << kiln_last_error();
    CompletionPtr owned_plain(plain);
    EXPECT_EQ(Ids(*speculative), Ids(*plain)) << prompt;
    EXPECT_EQ(Text(*speculative), Text(*plain)) << prompt;
  }
  kiln_engine* bad = nullptr;
  options.spec_method = "eagle";
  EXPECT_EQ(kiln_engine_create(SharedModel("tiny-qwen2"), &options, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "spec method 'eagle'")) << kiln_last_error();
}

TEST(CApiEngineOptions, DraftModelSpeculationKeepsTheGreedyOutput) {
  kiln_engine_options options = TinyEngineOptions();
  options.spec_method = "draft";
  options.draft_model = "self";
  options.draft_dtype = "q4_0";
  EnginePtr engine = CreateEngine(SharedModel("tiny-qwen2"), options);
  ASSERT_NE(engine, nullptr);
  EnginePtr plain_engine = CreateEngine(SharedModel("tiny-qwen2"));
  nlohmann::json ref = Reference("tiny-qwen2", 1);
  const std::string text = ref["prompt"].get<std::string>() + " " + ref["prompt"].get<std::string>();
  kiln_sampling_params params = Greedy(40);
  kiln_completion* speculative = nullptr;
  ASSERT_EQ(kiln_generate(engine.get(), text.c_str(), &params, &speculative), KILN_OK) << kiln_last_error();
  CompletionPtr owned(speculative);
  kiln_completion* plain = nullptr;
  ASSERT_EQ(kiln_generate(plain_engine.get(), text.c_str(), &params, &plain), KILN_OK) << kiln_last_error();
  CompletionPtr owned_plain(plain);
  EXPECT_EQ(Ids(*speculative), Ids(*plain));
  EXPECT_EQ(Text(*speculative), Text(*plain));

  kiln_engine* bad = nullptr;
  options.draft_model = nullptr;
  EXPECT_EQ(kiln_engine_create(SharedModel("tiny-qwen2"), &options, &bad), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "needs a draft model")) << kiln_last_error();
  const std::string missing = testing::ModelDir("tiny-qwen2") + "/no-such-draft";
  options.draft_model = missing.c_str();
  options.draft_dtype = nullptr;
  EXPECT_NE(kiln_engine_create(SharedModel("tiny-qwen2"), &options, &bad), KILN_OK);
  EXPECT_TRUE(Contains(kiln_last_error(), "no-such-draft")) << kiln_last_error();
}

TEST(CApiEngineOptions, BadOptionsAreErrorsNamingThem) {
  const kiln_model* model = SharedModel("tiny-qwen2");
  kiln_engine* engine = nullptr;
  kiln_engine_options options = TinyEngineOptions();
  options.precision = "fp8";
  EXPECT_EQ(kiln_engine_create(model, &options, &engine), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "kiln_engine_create: options.precision")) << kiln_last_error();
  options = TinyEngineOptions();
  options.kv_cache_dtype = "int3";
  EXPECT_EQ(kiln_engine_create(model, &options, &engine), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.kv_cache_dtype 'int3'")) << kiln_last_error();
  options = TinyEngineOptions();
  options.kv_cache_dtype = "int8";  // accepted: an int8 cache with a scale per token and head
  ASSERT_EQ(kiln_engine_create(model, &options, &engine), KILN_OK) << kiln_last_error();
  kiln_engine_destroy(engine);
  engine = nullptr;
  options = TinyEngineOptions();
  options.max_num_seqs = 0;
  EXPECT_EQ(kiln_engine_create(model, &options, &engine), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "max-num-seqs")) << kiln_last_error();
  options = TinyEngineOptions();
  options.kv_cache_memory_fraction = 1.5;
  EXPECT_EQ(kiln_engine_create(model, &options, &engine), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.kv_cache_memory_fraction")) << kiln_last_error();
  options = TinyEngineOptions();
  options.kv_cache_memory_bytes = 100;
  EXPECT_EQ(kiln_engine_create(model, &options, &engine), KILN_ERROR_RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Contains(kiln_last_error(), "holds no block")) << kiln_last_error();
  EXPECT_EQ(kiln_engine_create(nullptr, &options, &engine), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
}

TEST(CApiEngineLifetime, AnEngineOutlivesItsModelHandle) {
  ModelPtr model = LoadModel("tiny-qwen2");
  EnginePtr engine = CreateEngine(model.get());
  model.reset();
  nlohmann::json ref = Reference("tiny-qwen2", 0);
  kiln_sampling_params params = Greedy(8);
  kiln_completion* c = nullptr;
  ASSERT_EQ(kiln_generate(engine.get(), ref["prompt"].get<std::string>().c_str(), &params, &c), KILN_OK)
      << kiln_last_error();
  CompletionPtr owned(c);
  auto expected = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();
  expected.resize(8);
  EXPECT_EQ(Ids(*c), expected);
  EXPECT_EQ(kiln_engine_max_model_len(engine.get()), 1024);
}

}  // namespace engine_api_tests
}  // namespace kiln::capi_test
