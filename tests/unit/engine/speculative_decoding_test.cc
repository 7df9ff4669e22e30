// Speculative decoding changes no output, only how many tokens a pass
// yields. Greedy requests, with n-gram drafts verified in the batch's one
// pass, give byte for byte (token ids, text, log-probabilities, finish
// reasons) what they give without speculation, alone and batched with
// others, with preemption forced, with chunked prefill and a budget that
// trims drafts, with the prefix cache off, at every precision and KV cache
// dtype, on each tiny model and on GGUF files of several quantizations. The
// prompts are input-grounded (a passage of held-out text repeated, so drafts
// are often right) and free text (drafts mostly wrong or absent); sampled
// requests in the same batch speculate too (their distribution, not their
// seeded tokens, is what rejection sampling keeps: rejection_sampling_test.cc),
// and so do grammar-constrained ones, greedy output again unchanged.
#include <gtest/gtest.h>

#include <random>

#include "compiler/compiled_model.h"
#include "engine_test_util.h"
#include "speculation_test_util.h"

namespace kiln {
namespace speculative_decoding_tests {

using engine_test::CountMismatches;
using engine_test::EngineOrDie;
using engine_test::LoadOrDie;
using engine_test::RunAll;
using engine_test::TinyOptions;

// Requests of every kind speculation must leave alone: greedy on repeated
// passages (with EOS honoured or ignored, with a repetition penalty, with
// log-probabilities) and on free text, and seeded sampling beside them.
std::vector<GenerationRequest> Workload(const std::string& model, int count) {
  std::vector<int32_t> text = engine_test::HeldoutIds(model);
  std::mt19937_64 rng(std::hash<std::string>()(model) ^ 0x59ec);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < count; ++i) {
    GenerationRequest r;
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int32_t>(uniform(24, 96));
    r.params.ignore_eos = i % 2 == 0;
    const int kind = i % 6;
    if (kind == 4) {
      // Free text.
      const int64_t length = uniform(1, 200);
      const int64_t offset = uniform(0, static_cast<int64_t>(text.size()) - length);
      r.prompt_ids.assign(text.begin() + offset, text.begin() + offset + length);
    } else {
      // A passage, repeated, then its beginning once more: the model is
      // invited to go on quoting.
      const int64_t length = uniform(24, 96);
      const int64_t offset = uniform(0, static_cast<int64_t>(text.size()) - length);
      const std::vector<int32_t> passage(text.begin() + offset, text.begin() + offset + length);
      for (int64_t copies = uniform(1, 3); copies > 0; --copies) {
        r.prompt_ids.insert(r.prompt_ids.end(), passage.begin(), passage.end());
      }
      r.prompt_ids.insert(r.prompt_ids.end(), passage.begin(), passage.begin() + uniform(2, length / 2));
    }
    if (kind == 1) r.params.repetition_penalty = 1.3;
    if (kind == 2) {
      r.params.logprobs = true;
      r.params.top_logprobs = 3;
    }
    if (kind == 5) {
      r.params.temperature = 0.8;
      r.params.seed = static_cast<uint64_t>(1000 + i);
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

struct SpecConfig {
  const char* name;
  bool batched = true;  // all requests in one Generate, else one at a time
  int32_t spec_tokens = 4;
  int32_t ngram_min = 2;
  int32_t ngram_max = 4;
  bool prefix_caching = true;
  int32_t kv_blocks = 0;  // 0: the default pool
  int32_t max_prefill_chunk = 0;
  int32_t max_num_batched_tokens = 512;
  int32_t max_num_seqs = 64;
  bool adaptive = true;
  bool expect_preemption = false;
};

// Runs the workload without speculation, one request at a time, then under
// each configuration with n-gram speculation, and compares.
void CheckModel(const EngineOptions& base, const std::string& tiny_model, std::span<const SpecConfig> configs,
                int count) {
  LoadedModel loaded = LoadOrDie(base);
  ASSERT_NE(loaded.weights, nullptr);
  std::vector<GenerationRequest> requests = Workload(tiny_model, count);

  EngineOptions plain_options = base;
  plain_options.enable_prefix_caching = false;
  auto plain = EngineOrDie(loaded, plain_options);
  ASSERT_NE(plain, nullptr);
  std::vector<GenerationResult> expected = RunAll(*plain, requests, /*batched=*/false);
  ASSERT_EQ(expected.size(), requests.size());
  EXPECT_EQ(plain->Counters().spec_verifications, 0);
  const int64_t block_bytes = plain->compiled_model().MakeKvLayout(1).BlockBytes();

  for (const SpecConfig& config : configs) {
    SCOPED_TRACE(config.name);
    EngineOptions options = base;
    options.spec_method = "ngram";
    options.spec_tokens = config.spec_tokens;
    options.spec_ngram_min = config.ngram_min;
    options.spec_ngram_max = config.ngram_max;
    options.enable_prefix_caching = config.prefix_caching;
    options.max_prefill_chunk = config.max_prefill_chunk;
    options.max_num_batched_tokens = config.max_num_batched_tokens;
    options.max_num_seqs = config.max_num_seqs;
    options.spec_adaptive = config.adaptive;
    options.spec_max_batch = 0;  // speculate in every step, however large the batch
    // Draft lengths that follow acceptance alone, not timings: the same
    // drafts (and preemptions) on every run.
    options.spec_measure_costs = false;
    if (config.kv_blocks > 0) options.kv_cache_memory.bytes = config.kv_blocks * block_bytes;
    auto engine = EngineOrDie(loaded, options);
    ASSERT_NE(engine, nullptr);
    std::vector<GenerationResult> actual = RunAll(*engine, requests, config.batched);
    EXPECT_EQ(CountMismatches(requests, expected, actual), 0);

    const EngineCounters c = engine->Counters();
    EXPECT_EQ(c.kv_blocks_used, 0);
    // Speculation really ran, and the repeated passages were often guessed
    // right (a draft of the passage's next tokens).
    EXPECT_GT(c.spec_verifications, 0);
    EXPECT_GT(c.spec_accepted_tokens, c.spec_draft_tokens / 4)
        << c.spec_accepted_tokens << " of " << c.spec_draft_tokens << " draft tokens accepted";
    EXPECT_LE(c.spec_draft_tokens, c.spec_verifications * config.spec_tokens);
    // Every accepted token saved a pass: fewer steps than tokens decoded.
    int64_t generated = 0;
    for (const GenerationResult& r : actual) generated += static_cast<int64_t>(r.output_ids.size());
    EXPECT_EQ(c.generation_tokens, generated);
    if (config.expect_preemption) {
      EXPECT_GT(c.num_preemptions, 0);
    }
  }
}

constexpr SpecConfig kFullConfigs[] = {
    {.name = "alone", .batched = false},
    {.name = "batched"},
    {.name = "batched, prefix caching off", .prefix_caching = false},
    {.name = "small KV pool", .kv_blocks = 48, .expect_preemption = true},
    {.name = "prefill chunks of 16, 40 tokens a step",
     .max_prefill_chunk = 16,
     .max_num_batched_tokens = 40,
     .max_num_seqs = 8},
    {.name = "one draft token, 1-grams", .spec_tokens = 1, .ngram_min = 1, .ngram_max = 1},
    {.name = "fixed draft length", .adaptive = false},
    {.name = "eight draft tokens, 3- to 6-grams", .spec_tokens = 8, .ngram_min = 3, .ngram_max = 6},
};

TEST(SpeculativeDecodingTest, TinyLlama) {
  CheckModel(TinyOptions("tiny-llama"), "tiny-llama", kFullConfigs, 24);
}
TEST(SpeculativeDecodingTest, TinyQwen2) {
  CheckModel(TinyOptions("tiny-qwen2"), "tiny-qwen2", kFullConfigs, 24);
}
TEST(SpeculativeDecodingTest, TinyQwen3) {
  CheckModel(TinyOptions("tiny-qwen3"), "tiny-qwen3", kFullConfigs, 24);
}

constexpr SpecConfig kShortConfigs[] = {
    {.name = "alone", .batched = false},
    {.name = "small KV pool", .kv_blocks = 48, .expect_preemption = true},
};

TEST(SpeculativeDecodingTest, EveryPrecisionAndKvCacheDtype) {
  struct Variant {
    Precision precision;
    DType kv_dtype;
  };
  const Variant variants[] = {{Precision::kFp32, DType::kF32},
                              {Precision::kBf16, DType::kBF16},
                              {Precision::kMixed, DType::kI8},
                              {Precision::kMixed, DType::kF16}};
  for (const Variant& v : variants) {
    SCOPED_TRACE(::testing::Message()
                 << PrecisionName(v.precision) << ", KV cache " << DTypeName(v.kv_dtype));
    EngineOptions options = TinyOptions("tiny-qwen2");
    options.precision = v.precision;
    options.kv_cache_dtype = v.kv_dtype;
    CheckModel(options, "tiny-qwen2", kShortConfigs, 12);
  }
}

TEST(SpeculativeDecodingTest, GgufQuantizations) {
  for (const char* file :
       {"tiny-llama-Q4_0", "tiny-qwen2-Q8_0", "tiny-qwen3-Q4_K_M", "tiny-qwen3-F16", "tiny-qwen3-Q6_K"}) {
    SCOPED_TRACE(file);
    const std::string name = file;
    EngineOptions options = TinyOptions(name.substr(0, name.find('-', 5)));
    options.model = testing::SharedDir() + "/models/gguf/" + name + ".gguf";
    CheckModel(options, name.substr(0, name.find('-', 5)), kShortConfigs, 12);
  }
}

// Grammar-constrained requests speculate too: their drafts are cut to what
// the grammar allows and each verified row is masked, so greedy output is
// unchanged; a seeded sampled request beside them speculates as well.
TEST(SpeculativeDecodingTest, GrammarsSpeculateWithTheSameGreedyOutput) {
  EngineOptions options = TinyOptions("tiny-qwen3");
  LoadedModel loaded = LoadOrDie(options);
  ASSERT_NE(loaded.weights, nullptr);
  std::vector<int32_t> text = engine_test::HeldoutIds("tiny-qwen3");
  std::vector<int32_t> passage(text.begin() + 100, text.begin() + 160);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r;
    r.prompt_ids = passage;
    r.prompt_ids.insert(r.prompt_ids.end(), passage.begin(), passage.end());
    r.params.max_tokens = 40;
    r.params.ignore_eos = true;
    if (i == 0) {
      r.params.temperature = 0.7;
      r.params.seed = 5;
    } else if (i == 1) {
      r.params.temperature = 0;
      r.params.json_object = true;
    } else {
      r.params.temperature = 0;
      r.params.grammar = R"(root ::= [a-z ]+)";
    }
    requests.push_back(std::move(r));
  }
  auto plain = EngineOrDie(loaded, options);
  options.spec_method = "ngram";
  auto speculative = EngineOrDie(loaded, options);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(speculative, nullptr);
  std::vector<GenerationResult> expected = RunAll(*plain, requests, true);
  std::vector<GenerationResult> actual = RunAll(*speculative, requests, true);
  EXPECT_EQ(CountMismatches(requests, expected, actual), 0);
  // The constrained requests alone: their drafts were verified and kept,
  // so they took fewer steps than tokens.
  const std::vector<GenerationRequest> constrained(requests.begin() + 1, requests.end());
  auto alone = EngineOrDie(loaded, options);
  ASSERT_NE(alone, nullptr);
  EXPECT_EQ(
      CountMismatches(constrained, {expected.begin() + 1, expected.end()}, RunAll(*alone, constrained, true)),
      0);
  EXPECT_GT(alone->Counters().spec_accepted_tokens, 0);
  EXPECT_LT(alone->Counters().steps, 40);
}

// Past spec_max_batch decoding sequences a step verifies no drafts; at or
// below it, it does.
TEST(SpeculativeDecodingTest, LargeBatchesDoNotSpeculate) {
  EngineOptions options = TinyOptions("tiny-qwen2");
  LoadedModel loaded = LoadOrDie(options);
  ASSERT_NE(loaded.weights, nullptr);
  std::vector<int32_t> text = engine_test::HeldoutIds("tiny-qwen2");
  options.spec_method = "ngram";
  for (int32_t limit : {5, 6}) {
    SCOPED_TRACE(limit);
    options.spec_max_batch = limit;
    auto engine = EngineOrDie(loaded, options);
    ASSERT_NE(engine, nullptr);
    // Six requests whose prompts (a passage said twice) fit one prefill
    // step, finishing one after another.
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> passage(text.begin() + 40 * i, text.begin() + 40 * i + 24);
      GenerationRequest r = engine_test::GreedyIds(passage, 16 + 8 * i);
      r.prompt_ids.insert(r.prompt_ids.end(), passage.begin(), passage.end());
      ASSERT_TRUE(engine->AddRequest(std::move(r)).ok());
    }
    int64_t verified_with_six = 0, verified_with_fewer = 0;
    for (int step = 0; engine->HasUnfinishedRequests(); ++step) {
      const EngineCounters before = engine->Counters();
      ASSERT_TRUE(engine->Step().ok());
      const int64_t verified = engine->Counters().spec_verifications - before.spec_verifications;
      if (step == 0) continue;  // the prefill
      (before.num_running == 6 ? verified_with_six : verified_with_fewer) += verified;
    }
    EXPECT_EQ(verified_with_six > 0, limit >= 6);
    EXPECT_GT(verified_with_fewer, 0);
  }
}

}  // namespace speculative_decoding_tests
}  // namespace kiln
