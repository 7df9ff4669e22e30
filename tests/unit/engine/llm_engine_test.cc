// LLMEngine on the tiny models: golden greedy outputs, prefix cache stats,
// seeded sampling, stop conditions, streaming, aborts, refusals and
// requests added from other threads.
#include "engine/llm_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/block_manager.h"
#include "engine_test_util.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace llm_engine_tests {

using engine_test::EngineOrDie;
using engine_test::GreedyIds;
using engine_test::LoadOrDie;
using engine_test::TinyOptions;

// The four reference prompts of each model, served together with fp32
// activations, give exactly the reference's 64 greedy tokens.
TEST(LLMEngineTest, GreedyOutputsMatchTheReferenceOnAllTinyModels) {
  for (const char* model : engine_test::kTinyModels) {
    SCOPED_TRACE(model);
    EngineOptions options = TinyOptions(model);
    options.precision = Precision::kFp32;
    auto engine = EngineOrDie(LoadOrDie(options), options);
    ASSERT_NE(engine, nullptr);
    std::vector<GenerationRequest> requests;
    std::vector<std::vector<int32_t>> expected;
    for (int p = 0; p < 4; ++p) {
      nlohmann::json ref = engine_test::Reference(model, p);
      requests.push_back(GreedyIds(ref["input_ids"].get<std::vector<int32_t>>(), 64));
      expected.push_back(ref["greedy"]["new_ids"].get<std::vector<int32_t>>());
    }
    auto results = engine->Generate(std::move(requests));
    ASSERT_TRUE(results.ok()) << results.status().ToString();
    for (int p = 0; p < 4; ++p) {
      EXPECT_EQ((*results)[static_cast<size_t>(p)].output_ids, expected[static_cast<size_t>(p)])
          << "prompt " << p;
      EXPECT_EQ((*results)[static_cast<size_t>(p)].stats.finish_reason, FinishReason::kLength);
    }
  }
}

TEST(LLMEngineTest, TextPromptsAndStreamedTextAgreeWithTheTokenizer) {
  EngineOptions options = TinyOptions("tiny-qwen2");
  options.precision = Precision::kFp32;
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  nlohmann::json ref = engine_test::Reference("tiny-qwen2", 0);
  GenerationRequest r;
  r.prompt = ref["prompt"].get<std::string>();
  r.params.temperature = 0;
  r.params.max_tokens = 64;
  r.params.ignore_eos = true;
  std::string streamed;
  int events = 0;
  bool finished_seen = false;
  r.on_token = [&](const TokenEvent& e) {
    streamed += e.text;
    ++events;
    EXPECT_FALSE(finished_seen) << "an event after the final one";
    finished_seen = e.finished;
    if (e.finished) {
      ASSERT_NE(e.stats, nullptr);
      EXPECT_EQ(e.stats->completion_tokens, 64);
    }
  };
  auto results = engine->Generate({r});
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  const GenerationResult& out = (*results)[0];
  EXPECT_EQ(out.prompt_ids, ref["input_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(out.output_ids, ref["greedy"]["new_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(events, 64);
  EXPECT_TRUE(finished_seen);
  EXPECT_EQ(streamed, out.text);
  EXPECT_EQ(out.text, ref["greedy"]["decoded_new"].get<std::string>());
  const RequestStats& s = out.stats;
  EXPECT_EQ(s.prompt_tokens, static_cast<int32_t>(out.prompt_ids.size()));
  EXPECT_GE(s.queue_time(), 0);
  EXPECT_GT(s.ttft(), 0);
  EXPECT_GE(s.tpot(), 0);
  EXPECT_GE(s.finish_time, s.first_token_time);
}

TEST(LLMEngineTest, ASharedPrefixIsServedFromTheCacheWithTheSameOutput) {
  EngineOptions options = TinyOptions("tiny-qwen3");
  LoadedModel model = LoadOrDie(options);
  std::vector<int32_t> heldout = engine_test::HeldoutIds("tiny-qwen3");
  std::vector<int32_t> first(heldout.begin(), heldout.begin() + 500);
  std::vector<int32_t> second(heldout.begin(), heldout.begin() + 400);
  second.insert(second.end(), heldout.begin() + 3000, heldout.begin() + 3100);

  auto cached = EngineOrDie(model, options);
  ASSERT_NE(cached, nullptr);
  ASSERT_TRUE(cached->Generate({GreedyIds(first, 8)}).ok());
  auto with_cache = cached->Generate({GreedyIds(second, 32)});
  ASSERT_TRUE(with_cache.ok()) << with_cache.status().ToString();
  EXPECT_EQ((*with_cache)[0].stats.cached_tokens, 400);  // 25 full blocks of 16
  EngineCounters c = cached->Counters();
  EXPECT_EQ(c.prefix_cache_hits, 400);
  EXPECT_EQ(c.prefix_cache_queries, 500 + 500);

  options.enable_prefix_caching = false;
  auto uncached = EngineOrDie(model, options);
  ASSERT_NE(uncached, nullptr);
  auto without_cache = uncached->Generate({GreedyIds(second, 32)});
  ASSERT_TRUE(without_cache.ok());
  EXPECT_EQ((*without_cache)[0].stats.cached_tokens, 0);
  EXPECT_EQ((*with_cache)[0].output_ids, (*without_cache)[0].output_ids);

  // The same prompt again is cached up to its last full block before the end.
  auto again = cached->Generate({GreedyIds(second, 32)});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].stats.cached_tokens, 496);
  EXPECT_EQ((*again)[0].output_ids, (*without_cache)[0].output_ids);
}

TEST(LLMEngineTest, SeededSamplingIsReproducible) {
  EngineOptions options = TinyOptions("tiny-llama");
  LoadedModel model = LoadOrDie(options);
  auto request = [](uint64_t seed) {
    GenerationRequest r;
    r.prompt = "And the LORD spake unto Moses, saying,";
    r.params.temperature = 0.9;
    r.params.top_p = 0.95;
    r.params.top_k = 50;
    r.params.max_tokens = 48;
    r.params.seed = seed;
    r.params.ignore_eos = true;
    return r;
  };
  auto first = EngineOrDie(model, options);
  auto second = EngineOrDie(model, options);
  ASSERT_TRUE(first && second);
  auto a = first->Generate({request(7)});
  // The same seed in another engine, batched with other requests.
  auto b = second->Generate({request(99), request(7), request(8)});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].output_ids, (*b)[1].output_ids);
  EXPECT_EQ((*a)[0].text, (*b)[1].text);
  EXPECT_NE((*b)[0].output_ids, (*b)[1].output_ids);
  EXPECT_NE((*b)[2].output_ids, (*b)[1].output_ids);
}

TEST(LLMEngineTest, StopStringsEndTheTextAndAreNeverStreamed) {
  EngineOptions options = TinyOptions("tiny-qwen2");
  options.precision = Precision::kFp32;
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  nlohmann::json ref = engine_test::Reference("tiny-qwen2", 0);
  // The reference continuation: " a man that is in the morning, and he ..."
  GenerationRequest r = GreedyIds(ref["input_ids"].get<std::vector<int32_t>>(), 64);
  r.params.stop = {"morning"};
  std::string streamed;
  r.on_token = [&](const TokenEvent& e) { streamed += e.text; };
  auto results = engine->Generate({r});
  ASSERT_TRUE(results.ok());
  const GenerationResult& out = (*results)[0];
  EXPECT_EQ(out.stats.finish_reason, FinishReason::kStop);
  EXPECT_EQ(out.text, " a man that is in the ");
  EXPECT_EQ(streamed, out.text);
  EXPECT_LT(out.output_ids.size(), 64u);

  // A stop id ends generation too, and the id is reported but not its text.
  std::vector<int32_t> expected = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();
  GenerationRequest by_id = GreedyIds(ref["input_ids"].get<std::vector<int32_t>>(), 64);
  by_id.params.stop_token_ids = {expected[5]};
  auto stopped = engine->Generate({by_id});
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ((*stopped)[0].stats.finish_reason, FinishReason::kStop);
  EXPECT_EQ((*stopped)[0].output_ids, std::vector<int32_t>(expected.begin(), expected.begin() + 6));
  EXPECT_EQ((*stopped)[0].text,
            engine->tokenizer()->Decode(std::vector<int32_t>(expected.begin(), expected.begin() + 5)));
}

TEST(LLMEngineTest, StopStringsWaitForMinTokens) {
  EngineOptions options = TinyOptions("tiny-qwen2");
  options.precision = Precision::kFp32;
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  nlohmann::json ref = engine_test::Reference("tiny-qwen2", 0);
  // " a man that is in the morning, and he shall not be a man.\n..."
  GenerationRequest early = GreedyIds(ref["input_ids"].get<std::vector<int32_t>>(), 64);
  early.params.stop = {"man"};
  GenerationRequest late = early;
  late.params.min_tokens = 5;
  auto results = engine->Generate({early, late});
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)[0].text, " a ");
  EXPECT_EQ((*results)[1].text, " a man that is in the morning, and he shall not be a ");
  EXPECT_EQ((*results)[1].stats.finish_reason, FinishReason::kStop);
}

TEST(LLMEngineTest, LogprobsDescribeTheChosenTokens) {
  EngineOptions options = TinyOptions("tiny-qwen3");
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  GenerationRequest r = GreedyIds({100, 200, 300, 400}, 6);
  r.params.logprobs = true;
  r.params.top_logprobs = 3;
  std::vector<TokenEvent> events;
  r.on_token = [&](const TokenEvent& e) { events.push_back(e); };
  GenerationRequest plain = GreedyIds({100, 200, 300, 400}, 6);
  auto results = engine->Generate({r, plain});
  ASSERT_TRUE(results.ok());
  const GenerationResult& out = (*results)[0];
  ASSERT_EQ(out.logprobs.size(), 6u);
  EXPECT_TRUE((*results)[1].logprobs.empty());
  EXPECT_EQ(out.output_ids, (*results)[1].output_ids);
  ASSERT_EQ(events.size(), 6u);
  for (size_t i = 0; i < events.size(); ++i) {
    const TokenEvent& e = events[i];
    ASSERT_EQ(e.top_logprobs.size(), 3u);
    EXPECT_EQ(e.top_logprobs[0].token, e.token);  // greedy picks the most likely
    EXPECT_FLOAT_EQ(e.top_logprobs[0].logprob, e.logprob);
    EXPECT_LE(e.logprob, 0.0f);
    EXPECT_GE(e.top_logprobs[0].logprob, e.top_logprobs[1].logprob);
    EXPECT_FLOAT_EQ(out.logprobs[i], e.logprob);
  }
}

TEST(LLMEngineTest, EndOfSequenceStopsUnlessIgnored) {
  EngineOptions options = TinyOptions("tiny-qwen2");
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  EXPECT_NE(std::find(engine->eos_token_ids().begin(), engine->eos_token_ids().end(), 2045),
            engine->eos_token_ids().end());
  // The models learned to end documents with <|endoftext|>: a short fortune
  // cookie line followed by a newline tends to end quickly. Look for a
  // request that stops, among a few.
  std::vector<GenerationRequest> requests;
  const char* prompts[] = {"Q: What is a computer?\nA:", "You will be happy.\n", "Beware of the dog.\n\n"};
  for (const char* p : prompts) {
    GenerationRequest r;
    r.prompt = p;
    r.params.temperature = 0;
    r.params.max_tokens = 200;
    requests.push_back(r);
  }
  auto results = engine->Generate(requests);
  ASSERT_TRUE(results.ok());
  for (const GenerationResult& r : *results) {
    if (r.stats.finish_reason != FinishReason::kStop) continue;
    EXPECT_EQ(r.output_ids.back(), 2045);
    EXPECT_EQ(r.text.find("<|endoftext|>"), std::string::npos);
    // With ignore_eos the same request runs on to max_tokens.
    GenerationRequest again = GreedyIds(r.prompt_ids, static_cast<int32_t>(r.output_ids.size()) + 3);
    auto more = engine->Generate({again});
    ASSERT_TRUE(more.ok());
    EXPECT_EQ((*more)[0].stats.finish_reason, FinishReason::kLength);
    EXPECT_EQ((*more)[0].output_ids.size(), r.output_ids.size() + 3);
    return;
  }
  GTEST_SKIP() << "none of the prompts reached end-of-sequence greedily";
}

TEST(LLMEngineTest, AbortEndsTheRequestAndFreesItsBlocks) {
  EngineOptions options = TinyOptions("tiny-llama");
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  std::vector<int32_t> heldout = engine_test::HeldoutIds("tiny-llama");
  std::vector<FinishReason> reasons(2, FinishReason::kNone);
  std::vector<int> tokens(2, 0);
  std::vector<RequestId> ids;
  for (int i = 0; i < 2; ++i) {
    GenerationRequest r = GreedyIds(std::vector<int32_t>(heldout.begin(), heldout.begin() + 100 + i), 500);
    r.on_token = [&reasons, &tokens, i](const TokenEvent& e) {
      if (e.token >= 0) ++tokens[static_cast<size_t>(i)];
      if (e.finished) reasons[static_cast<size_t>(i)] = e.stats->finish_reason;
    };
    auto id = engine->AddRequest(r);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  for (int step = 0; step < 5; ++step) ASSERT_TRUE(engine->Step().ok());
  EXPECT_GT(engine->Counters().kv_blocks_used, 0);
  engine->Abort(ids[0]);
  engine->Abort(12345);  // unknown: ignored
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(reasons[0], FinishReason::kAbort);
  EXPECT_EQ(reasons[1], FinishReason::kNone);
  int tokens_at_abort = tokens[0];
  engine->Abort(ids[1]);
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(reasons[1], FinishReason::kAbort);
  EXPECT_FALSE(engine->HasUnfinishedRequests());
  EXPECT_EQ(engine->Counters().kv_blocks_used, 0);
  EXPECT_EQ(tokens[0], tokens_at_abort);
  engine->Abort(ids[0]);  // finished: ignored
  EXPECT_TRUE(engine->Step().ok());
}

TEST(LLMEngineTest, RefusesRequestsThatCanNeverRun) {
  EngineOptions options = TinyOptions("tiny-qwen2");
  options.kv_cache_memory.bytes = 40 * 16 * 4 * 2 * 2 * 32 * 4;  // 40 blocks of 16 tokens
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->num_kv_blocks(), 40);
  std::vector<int32_t> heldout = engine_test::HeldoutIds("tiny-qwen2");

  auto too_long =
      engine->AddRequest(GreedyIds(std::vector<int32_t>(heldout.begin(), heldout.begin() + 1024), 1));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_long.status().message().find("context of 1024"), std::string::npos)
      << too_long.status().message();

  auto no_room =
      engine->AddRequest(GreedyIds(std::vector<int32_t>(heldout.begin(), heldout.begin() + 1000), 100));
  ASSERT_FALSE(no_room.ok());
  EXPECT_EQ(no_room.status().code(), StatusCode::kOutOfRange);

  auto too_big =
      engine->AddRequest(GreedyIds(std::vector<int32_t>(heldout.begin(), heldout.begin() + 600), 100));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("40"), std::string::npos) << too_big.status().message();

  GenerationRequest empty;
  EXPECT_FALSE(engine->AddRequest(empty).ok());
  EXPECT_EQ(engine->AddRequest(GreedyIds({1, 2, 5000}, 4)).status().code(), StatusCode::kOutOfRange);
  GenerationRequest bad_params = GreedyIds({1, 2, 3}, 4);
  bad_params.params.top_p = 0;
  EXPECT_EQ(engine->AddRequest(bad_params).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine->HasUnfinishedRequests());

  // Generate refuses the whole batch and runs nothing.
  auto batch = engine->Generate({GreedyIds({1, 2, 3}, 4), GreedyIds({1, 2, 5000}, 4)});
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.status().message().find("request 1"), std::string::npos) << batch.status().message();
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_FALSE(engine->HasUnfinishedRequests());
  EXPECT_EQ(engine->Counters().generation_tokens, 0);
}

TEST(LLMEngineTest, RequestsAddedAndAbortedFromOtherThreads) {
  EngineOptions options = TinyOptions("tiny-qwen2");
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 64;
  options.kv_cache_memory.bytes = 48 * 16 * 4 * 2 * 2 * 32 * 4;  // tight: some preemption
  auto engine = EngineOrDie(LoadOrDie(options), options);
  ASSERT_NE(engine, nullptr);
  std::vector<int32_t> heldout = engine_test::HeldoutIds("tiny-qwen2");

  constexpr int kPerThread = 12;
  std::atomic<int> finished{0}, aborted{0}, submitted{0};
  std::atomic<bool> producers_done{false};
  auto producer = [&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      size_t start = static_cast<size_t>(t * 1000 + i * 37);
      GenerationRequest r =
          GreedyIds(std::vector<int32_t>(heldout.begin() + static_cast<ptrdiff_t>(start),
                                         heldout.begin() + static_cast<ptrdiff_t>(start + 20 + i * 7)),
                    16 + i);
      r.on_token = [&](const TokenEvent& e) {
        if (!e.finished) return;
        ++finished;
        if (e.stats->finish_reason == FinishReason::kAbort) ++aborted;
      };
      auto id = engine->AddRequest(r);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ++submitted;
      if (i % 4 == 3) engine->Abort(*id);
      std::this_thread::yield();
    }
  };
  std::thread a(producer, 0), b(producer, 1);
  std::thread loop([&]() {
    while (!producers_done.load() || engine->HasUnfinishedRequests()) {
      Status s = engine->Step();
      ASSERT_TRUE(s.ok()) << s.ToString();
      if (!engine->HasUnfinishedRequests()) std::this_thread::yield();
    }
  });
  a.join();
  b.join();
  producers_done = true;
  loop.join();
  EXPECT_EQ(submitted.load(), 2 * kPerThread);
  EXPECT_EQ(finished.load(), 2 * kPerThread);
  EXPECT_LE(aborted.load(), 2 * kPerThread / 4);
  EngineCounters c = engine->Counters();
  EXPECT_EQ(c.kv_blocks_used, 0);
  EXPECT_EQ(c.num_running + c.num_waiting, 0);
  EXPECT_EQ(c.requests_finished, 2 * kPerThread);
}

}  // namespace llm_engine_tests
}  // namespace kiln
