// The engine thread: requests added from many threads are batched and give
// what the engine gives alone; refusals come back; aborts end requests and
// free their KV blocks; stopping ends what is unfinished.
#include "server/engine_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server_test_util.h"
#include "tokenizer/tokenizer.h"

namespace kiln::server {
namespace engine_loop_tests {

// Collects one request's tokens on the engine thread.
struct Collector {
  std::mutex mu;
  std::condition_variable done_cv;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  bool done = false;

  TokenCallback Callback() {
    return [this](const TokenEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (e.token >= 0) tokens.push_back(e.token);
      if (e.finished) {
        reason = e.stats->finish_reason;
        done = true;
        done_cv.notify_all();
      }
    };
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    done_cv.wait(lock, [this] { return done; });
  }
};

GenerationRequest Greedy(std::string prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

TEST(EngineLoopTest, RequestsFromManyThreadsMatchTheEngineAlone) {
  auto reference = server_test::TinyEngine();
  auto engine = server_test::TinyEngine();
  ASSERT_TRUE(reference && engine);
  const std::vector<std::string> prompts = {"The king", "Once upon a time", "And the LORD said", "In the beginning"};
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& p : prompts) {
    auto results = reference->Generate({Greedy(p, 24)});
    ASSERT_TRUE(results.ok());
    expected.push_back((*results)[0].output_ids);
  }

  EngineLoop loop(*engine);
  constexpr int kThreads = 16;
  std::vector<Collector> collectors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      GenerationRequest r = Greedy(prompts[static_cast<size_t>(t) % prompts.size()], 24);
      r.on_token = collectors[static_cast<size_t>(t)].Callback();
      ASSERT_TRUE(loop.Add(std::move(r)).ok());
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    Collector& c = collectors[static_cast<size_t>(t)];
    c.Wait();
    EXPECT_EQ(c.tokens, expected[static_cast<size_t>(t) % prompts.size()]) << "request " << t;
    EXPECT_EQ(c.reason, FinishReason::kLength);
  }
  EXPECT_EQ(loop.num_unfinished(), 0);
  loop.Stop();
  EXPECT_EQ(engine->Counters().kv_blocks_used, 0);
}

TEST(EngineLoopTest, RefusalsComeBackFromAdd) {
  auto engine = server_test::TinyEngine();
  ASSERT_TRUE(engine);
  EngineLoop loop(*engine);
  GenerationRequest r = Greedy("x", 1 << 20);  // beyond the context
  Expected<RequestId> id = loop.Add(std::move(r));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("context"), std::string::npos);
  EXPECT_EQ(loop.num_unfinished(), 0);
}

TEST(EngineLoopTest, AbortEndsARequestAndFreesItsBlocks) {
  auto engine = server_test::TinyEngine();
  ASSERT_TRUE(engine);
  EngineLoop loop(*engine);
  std::atomic<int> seen{0};
  Collector c;
  GenerationRequest r = Greedy("The king", 1000);
  TokenCallback collect = c.Callback();
  r.on_token = [&](const TokenEvent& e) {
    seen += 1;
    collect(e);
  };
  Expected<RequestId> id = loop.Add(std::move(r));
  ASSERT_TRUE(id.ok());
  while (seen.load() < 3) std::this_thread::yield();
  loop.Abort(*id);
  c.Wait();
  EXPECT_EQ(c.reason, FinishReason::kAbort);
  EXPECT_LT(c.tokens.size(), 1000u);
  // The loop refreshes the gauges when the abort is applied.
  for (int i = 0; i < 100 && engine->Counters().kv_blocks_used > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine->Counters().kv_blocks_used, 0);
  EXPECT_EQ(loop.num_unfinished(), 0);
}

TEST(EngineLoopTest, StopAbortsWhatIsUnfinished) {
  auto engine = server_test::TinyEngine();
  ASSERT_TRUE(engine);
  std::vector<Collector> collectors(4);
  {
    EngineLoop loop(*engine);
    for (Collector& c : collectors) {
      GenerationRequest r = Greedy("Once upon a time", 1000);
      r.on_token = c.Callback();
      ASSERT_TRUE(loop.Add(std::move(r)).ok());
    }
    loop.Stop();
    EXPECT_EQ(loop.num_unfinished(), 0);
  }
  for (Collector& c : collectors) {
    EXPECT_TRUE(c.done);
    EXPECT_TRUE(c.reason == FinishReason::kAbort || c.reason == FinishReason::kLength);
  }
  EXPECT_FALSE(engine->HasUnfinishedRequests());
}

}  // namespace engine_loop_tests
}  // namespace kiln::server
