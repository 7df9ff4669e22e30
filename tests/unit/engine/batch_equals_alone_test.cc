// Serving requests together changes nothing: 64 greedy requests of mixed
// prompt lengths (1-960 tokens, up to 64 new tokens) run in one continuous
// batch give, token for token, what each gives alone, on each tiny model in
// the default precision: with the prefix cache on and off, with a KV pool
// small enough to force preemption, and with prefill chunks of 16, 64 and
// 512 tokens.
#include <gtest/gtest.h>

#include <random>

#include "compiler/compiled_model.h"
#include "engine_test_util.h"

namespace kiln {
namespace batch_equals_alone_tests {

using engine_test::EngineOrDie;
using engine_test::LoadOrDie;
using engine_test::TinyOptions;

constexpr int kRequests = 64;
constexpr int32_t kMaxPrompt = 960;
constexpr int32_t kMaxNew = 64;

// Prompts cut from held-out text: some at its start, so that they share
// prefixes of many lengths; edge lengths around a block boundary; the rest
// random. Half stop at end-of-sequence, half run to max_tokens.
std::vector<GenerationRequest> Workload(const std::string& model) {
  std::vector<int32_t> text = engine_test::HeldoutIds(model);
  std::mt19937_64 rng(std::hash<std::string>()(model) ^ 0x5eed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t fixed_lengths[] = {1, 2, 15, 16, 17, 31, 32, 33, kMaxPrompt, kMaxPrompt - 1};
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    int64_t length = i < 10 ? fixed_lengths[i] : uniform(1, kMaxPrompt);
    int64_t offset = i % 3 == 0 ? 0 : uniform(0, static_cast<int64_t>(text.size()) - length);
    GenerationRequest r;
    r.prompt_ids.assign(text.begin() + offset, text.begin() + offset + length);
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int32_t>(uniform(1, kMaxNew));
    r.params.ignore_eos = i % 2 == 0;
    requests.push_back(std::move(r));
  }
  return requests;
}

struct BatchConfig {
  const char* name;
  bool prefix_caching = true;
  int32_t kv_blocks = 0;  // 0: the default pool
  int32_t max_prefill_chunk = 0;
  int32_t max_num_batched_tokens = 512;
  bool expect_preemption = false;
};

void CheckModel(const std::string& model) {
  EngineOptions base = TinyOptions(model);
  LoadedModel loaded = LoadOrDie(base);
  ASSERT_NE(loaded.weights, nullptr);
  std::vector<GenerationRequest> requests = Workload(model);

  // Alone: one request at a time, nothing cached from the previous one.
  EngineOptions alone_options = base;
  alone_options.enable_prefix_caching = false;
  auto alone_engine = EngineOrDie(loaded, alone_options);
  ASSERT_NE(alone_engine, nullptr);
  std::vector<std::vector<int32_t>> alone;
  for (const GenerationRequest& r : requests) {
    auto result = alone_engine->Generate({r});
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    alone.push_back((*result)[0].output_ids);
  }
  const int64_t block_bytes = alone_engine->compiled_model().MakeKvLayout(1).BlockBytes();

  const BatchConfig configs[] = {
      {.name = "prefix caching on"},
      {.name = "prefix caching off", .prefix_caching = false},
      {.name = "small KV pool", .kv_blocks = 80, .expect_preemption = true},
      {.name = "prefill chunks of 16", .max_prefill_chunk = 16},
      {.name = "prefill chunks of 64", .max_prefill_chunk = 64},
      {.name = "prefill chunks of 512", .max_prefill_chunk = 512, .max_num_batched_tokens = 1024},
  };
  for (const BatchConfig& config : configs) {
    SCOPED_TRACE(config.name);
    EngineOptions options = base;
    options.enable_prefix_caching = config.prefix_caching;
    options.max_prefill_chunk = config.max_prefill_chunk;
    options.max_num_batched_tokens = config.max_num_batched_tokens;
    if (config.kv_blocks > 0) options.kv_cache_memory.bytes = config.kv_blocks * block_bytes;
    auto engine = EngineOrDie(loaded, options);
    ASSERT_NE(engine, nullptr);
    auto results = engine->Generate(requests);
    ASSERT_TRUE(results.ok()) << results.status().ToString();
    int mismatches = 0;
    for (int i = 0; i < kRequests; ++i) {
      const GenerationResult& r = (*results)[static_cast<size_t>(i)];
      if (r.output_ids != alone[static_cast<size_t>(i)] && ++mismatches <= 3) {
        ADD_FAILURE() << "request " << i << " (" << requests[static_cast<size_t>(i)].prompt_ids.size()
                      << " prompt tokens) differs from its output alone";
      }
    }
    EXPECT_EQ(mismatches, 0);
    EngineCounters c = engine->Counters();
    EXPECT_EQ(c.kv_blocks_used, 0);
    if (config.expect_preemption) {
      EXPECT_GT(c.num_preemptions, 0);
    }
    if (config.prefix_caching) {
      EXPECT_GT(c.prefix_cache_hits, 0);
    } else {
      EXPECT_EQ(c.prefix_cache_hits, 0);
    }
  }
}

TEST(BatchEqualsAloneTest, TinyLlama) {
  CheckModel("tiny-llama");
}
TEST(BatchEqualsAloneTest, TinyQwen2) {
  CheckModel("tiny-qwen2");
}
TEST(BatchEqualsAloneTest, TinyQwen3) {
  CheckModel("tiny-qwen3");
}

}  // namespace batch_equals_alone_tests
}  // namespace kiln
