// Speculative decoding with a draft model: greedy output is byte for byte
// what it is without a draft, alone, batched, with preemption forced and
// with chunked prefill, whether the draft is the model itself at q4_0
// ("self") or another model with the same tokenizer (tiny-qwen2 drafting
// for tiny-qwen3). A draft that is the model itself at its own dtype
// computes the target's own logits, so every draft token is accepted: any
// slip in keeping the draft's KV cache in step with the target's tokens
// (rollback, catch-up, preemption) would show as a rejection. Measuring
// what drafting costs changes no greedy output, and the proposer times
// catching its cache up apart from drafting. A draft that does not pay
// stops without changing the output. Bad options are refused with
// errors naming the models.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "compiler/compiled_model.h"
#include "engine/draft_model.h"
#include "engine/draft_model_proposer.h"
#include "engine/model_session.h"
#include "engine/model_session_options.h"
#include "engine_test_util.h"
#include "format/weight_store.h"
#include "speculation_test_util.h"

namespace kiln {
namespace draft_model_tests {

using engine_test::CountMismatches;
using engine_test::EngineOrDie;
using engine_test::LoadOrDie;
using engine_test::RunAll;
using engine_test::TinyOptions;

// Input-grounded prompts (a held-out passage repeated, then its start once
// more) and free text; greedy with EOS honoured or ignored, one with
// log-probabilities and one seeded sampled request among them.
std::vector<GenerationRequest> Workload(const std::string& model, int count, bool with_sampling = true) {
  std::vector<int32_t> text = engine_test::HeldoutIds(model);
  std::mt19937_64 rng(std::hash<std::string>()(model) ^ 0xd4af7);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < count; ++i) {
    GenerationRequest r;
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int32_t>(uniform(16, 64));
    r.params.ignore_eos = i % 2 == 0;
    if (i % 4 == 3) {
      const int64_t length = uniform(1, 160);
      const int64_t offset = uniform(0, static_cast<int64_t>(text.size()) - length);
      r.prompt_ids.assign(text.begin() + offset, text.begin() + offset + length);
    } else {
      const int64_t length = uniform(24, 80);
      const int64_t offset = uniform(0, static_cast<int64_t>(text.size()) - length);
      const std::vector<int32_t> passage(text.begin() + offset, text.begin() + offset + length);
      for (int64_t copies = uniform(1, 2); copies > 0; --copies) {
        r.prompt_ids.insert(r.prompt_ids.end(), passage.begin(), passage.end());
      }
      r.prompt_ids.insert(r.prompt_ids.end(), passage.begin(), passage.begin() + uniform(2, length / 2));
    }
    if (i % 4 == 1) {
      r.params.logprobs = true;
      r.params.top_logprobs = 2;
    }
    if (with_sampling && i % 8 == 6) {
      r.params.temperature = 0.8;
      r.params.seed = static_cast<uint64_t>(500 + i);
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

struct DraftRun {
  const char* name;
  bool batched = true;
  int32_t spec_tokens = 4;
  int32_t kv_blocks = 0;  // blocks of each cache; 0: the default budget
  int32_t max_prefill_chunk = 0;
  int32_t max_num_batched_tokens = 512;
  int32_t max_num_seqs = 64;
  bool expect_preemption = false;
};

constexpr DraftRun kRuns[] = {
    {.name = "alone", .batched = false},
    {.name = "batched"},
    {.name = "small KV pool", .kv_blocks = 40, .expect_preemption = true},
    {.name = "prefill chunks of 16, 40 tokens a step",
     .max_prefill_chunk = 16,
     .max_num_batched_tokens = 40,
     .max_num_seqs = 8},
    {.name = "seven draft tokens", .spec_tokens = 7},
};

// Bytes of one KV block of `model` under `options`.
int64_t BlockBytes(const LoadedModel& model, const EngineOptions& options) {
  auto session_options = SessionOptionsFor(options, model);
  EXPECT_TRUE(session_options.ok()) << session_options.status().ToString();
  auto compiled = CompileForSession(*model.weights, *session_options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return compiled.ok() ? (*compiled)->MakeKvLayout(1).BlockBytes() : 0;
}

// Runs the workload without speculation one request at a time, then with
// the draft model under each run's settings, and compares. Returns the
// counters of the last run.
void CheckDraft(const EngineOptions& base, const std::string& tiny_model, const std::string& draft_model,
                const std::string& draft_dtype, std::span<const DraftRun> runs, int count) {
  LoadedModel loaded = LoadOrDie(base);
  ASSERT_NE(loaded.weights, nullptr);
  std::vector<GenerationRequest> requests = Workload(tiny_model, count);
  EngineOptions plain_options = base;
  plain_options.enable_prefix_caching = false;
  auto plain = EngineOrDie(loaded, plain_options);
  ASSERT_NE(plain, nullptr);
  std::vector<GenerationResult> expected = RunAll(*plain, requests, /*batched=*/false);
  ASSERT_EQ(expected.size(), requests.size());

  const int64_t target_block = plain->compiled_model().MakeKvLayout(1).BlockBytes();
  EngineOptions draft_base = base;
  if (draft_model != "self") draft_base.model = draft_model;
  LoadedModel draft_loaded = draft_model == "self" ? loaded : LoadOrDie(draft_base);
  const int64_t draft_block = BlockBytes(draft_loaded, draft_base);

  for (const DraftRun& run : runs) {
    SCOPED_TRACE(run.name);
    EngineOptions options = base;
    options.spec_method = "draft";
    options.spec_max_batch = 0;  // draft in every step, however large the batch
    // Draft lengths that follow acceptance alone, not timings: the same
    // drafts (and preemptions) on every run.
    options.spec_measure_costs = false;
    options.draft_model = draft_model;
    options.draft_dtype = draft_dtype;
    options.spec_tokens = run.spec_tokens;
    options.max_prefill_chunk = run.max_prefill_chunk;
    options.max_num_batched_tokens = run.max_num_batched_tokens;
    options.max_num_seqs = run.max_num_seqs;
    if (run.kv_blocks > 0) options.kv_cache_memory.bytes = run.kv_blocks * (target_block + draft_block);
    auto engine = EngineOrDie(loaded, options);
    ASSERT_NE(engine, nullptr);
    if (run.kv_blocks > 0) {
      EXPECT_EQ(engine->num_kv_blocks(), run.kv_blocks);
    }
    std::vector<GenerationResult> actual = RunAll(*engine, requests, run.batched);
    EXPECT_EQ(CountMismatches(requests, expected, actual), 0);
    const EngineCounters c = engine->Counters();
    EXPECT_EQ(c.kv_blocks_used, 0);
    EXPECT_GT(c.spec_verifications, 0);
    EXPECT_GT(c.spec_accepted_tokens, c.spec_draft_tokens / 4)
        << c.spec_accepted_tokens << " of " << c.spec_draft_tokens << " draft tokens accepted";
    EXPECT_LE(c.spec_draft_tokens, c.spec_verifications * run.spec_tokens);
    if (run.expect_preemption) {
      EXPECT_GT(c.num_preemptions, 0);
    }
  }
}

TEST(DraftModelTest, SelfQ4_0TinyLlama) {
  CheckDraft(TinyOptions("tiny-llama"), "tiny-llama", "self", "q4_0", kRuns, 16);
}
TEST(DraftModelTest, SelfQ4_0TinyQwen2) {
  CheckDraft(TinyOptions("tiny-qwen2"), "tiny-qwen2", "self", "q4_0", kRuns, 16);
}
TEST(DraftModelTest, SelfQ4_0TinyQwen3) {
  CheckDraft(TinyOptions("tiny-qwen3"), "tiny-qwen3", "self", "q4_0", kRuns, 16);
}

// tiny-qwen2 and tiny-qwen3 share a tokenizer: the smaller drafts for the
// larger.
TEST(DraftModelTest, TinyQwen2DraftsForTinyQwen3) {
  CheckDraft(TinyOptions("tiny-qwen3"), "tiny-qwen3", testing::ModelDir("tiny-qwen2"), "", kRuns, 16);
}

// A tiny model, 8 greedy requests of Workload and what it answers them
// without speculation, one at a time (expected is empty, and a failure
// reported, when the model could not be run).
struct GreedyBaseline {
  EngineOptions base;
  LoadedModel loaded;
  std::vector<GenerationRequest> requests;
  std::vector<GenerationResult> expected;
};
GreedyBaseline GreedyBaselineOf(const std::string& model) {
  GreedyBaseline b;
  b.base = TinyOptions(model);
  b.loaded = LoadOrDie(b.base);
  b.requests = Workload(model, 8, /*with_sampling=*/false);
  if (b.loaded.weights == nullptr) return b;
  auto plain = EngineOrDie(b.loaded, b.base);
  EXPECT_NE(plain, nullptr);
  if (plain != nullptr) b.expected = RunAll(*plain, b.requests, /*batched=*/false);
  return b;
}

// tiny-qwen2 guesses few of tiny-qwen3's tokens: with the fixed costs
// (no timings, so the same drafts on every run), requests whose drafts do
// not pay stop drafting for good once judged, and the output is still
// byte for byte the model's own, alone and batched.
TEST(DraftModelTest, ADraftThatDoesNotPayStopsWithoutChangingTheOutput) {
  const auto& [base, loaded, requests, expected] = GreedyBaselineOf("tiny-qwen3");
  ASSERT_EQ(expected.size(), requests.size());
  for (bool batched : {false, true}) {
    SCOPED_TRACE(batched ? "batched" : "alone");
    EngineOptions options = base;
    options.spec_method = "draft";
    options.draft_model = testing::ModelDir("tiny-qwen2");
    options.spec_measure_costs = false;
    auto engine = EngineOrDie(loaded, options);
    ASSERT_NE(engine, nullptr);
    std::vector<GenerationResult> actual = RunAll(*engine, requests, batched);
    EXPECT_EQ(CountMismatches(requests, expected, actual), 0);
    const EngineCounters c = engine->Counters();
    EXPECT_GT(c.spec_stopped_requests, 0);
    EXPECT_LE(c.spec_stopped_requests, static_cast<int64_t>(requests.size()));
    // A stopped request verified at least four drafts first.
    EXPECT_GE(c.spec_verifications, 4 * c.spec_stopped_requests);
  }
}

// Measuring what drafting costs changes only how long drafts are (and so
// when they are made): greedy output is the same with the meter and
// without, by a draft model and by prompt lookup, and the costs are
// reported only when measured. Prompt lookup pauses, never stops.
TEST(DraftModelTest, MeasuredCostsChangeNoGreedyOutput) {
  const auto& [base, loaded, requests, expected] = GreedyBaselineOf("tiny-llama");
  ASSERT_EQ(expected.size(), requests.size());
  for (const char* method : {"draft", "ngram"}) {
    for (bool measure : {true, false}) {
      SCOPED_TRACE(std::string(method) + (measure ? " measured" : " not measured"));
      EngineOptions options = base;
      options.spec_method = method;
      if (options.spec_method == "draft") {
        options.draft_model = "self";
        options.draft_dtype = "q4_0";
      }
      options.spec_measure_costs = measure;
      auto engine = EngineOrDie(loaded, options);
      ASSERT_NE(engine, nullptr);
      // One at a time: every decode step has one sequence, whose plain
      // pass is timed first.
      std::vector<GenerationResult> actual = RunAll(*engine, requests, /*batched=*/false);
      EXPECT_EQ(CountMismatches(requests, expected, actual), 0);
      const EngineCounters c = engine->Counters();
      EXPECT_GT(c.spec_verifications, 0);
      if (!measure) {
        EXPECT_EQ(c.spec_row_cost, 0);
        EXPECT_EQ(c.spec_draft_cost, 0);
      } else if (options.spec_method == "draft") {
        EXPECT_GT(c.spec_draft_cost, 0);
      } else {
        EXPECT_LT(c.spec_draft_cost, 1);  // a lookup costs far less than a pass
      }
      if (options.spec_method == "ngram") {
        EXPECT_EQ(c.spec_stopped_requests, 0);
      }
    }
  }
}

// The model drafting for itself at its own dtype computes exactly the
// target's logits (the CPU kernels are batch-invariant), so a draft cache
// in step with the sequence guesses every greedy token right.
TEST(DraftModelTest, SelfAtItsOwnDtypeIsAlwaysAccepted) {
  for (const char* model : engine_test::kTinyModels) {
    SCOPED_TRACE(model);
    EngineOptions options = TinyOptions(model);
    LoadedModel loaded = LoadOrDie(options);
    ASSERT_NE(loaded.weights, nullptr);
    std::vector<GenerationRequest> requests = Workload(model, 12, /*with_sampling=*/false);
    auto plain = EngineOrDie(loaded, options);
    ASSERT_NE(plain, nullptr);
    std::vector<GenerationResult> expected = RunAll(*plain, requests, /*batched=*/true);
    const int64_t block = plain->compiled_model().MakeKvLayout(1).BlockBytes();

    for (const DraftRun& run : kRuns) {
      SCOPED_TRACE(run.name);
      options.spec_method = "draft";
      options.spec_max_batch = 0;  // draft in every step, however large the batch
      // Draft lengths that follow acceptance alone, not timings: the same
      // drafts (and preemptions) on every run.
      options.spec_measure_costs = false;
      options.draft_model = "self";
      options.spec_tokens = run.spec_tokens;
      options.max_prefill_chunk = run.max_prefill_chunk;
      options.max_num_batched_tokens = run.max_num_batched_tokens;
      options.max_num_seqs = run.max_num_seqs;
      options.kv_cache_memory.bytes = run.kv_blocks > 0 ? run.kv_blocks * 2 * block : 0;
      auto engine = EngineOrDie(loaded, options);
      ASSERT_NE(engine, nullptr);
      std::vector<GenerationResult> actual = RunAll(*engine, requests, run.batched);
      EXPECT_EQ(CountMismatches(requests, expected, actual), 0);
      const EngineCounters c = engine->Counters();
      EXPECT_GT(c.spec_draft_tokens, 0);
      EXPECT_EQ(c.spec_accepted_tokens, c.spec_draft_tokens);
      if (run.expect_preemption) {
        EXPECT_GT(c.num_preemptions, 0);
      }
    }
  }
}

// A tiny model drafting for itself at `dtype` (empty: as loaded), with the
// target's session beside: what the engine builds for --draft-model self.
// Null sessions when something failed (and reported).
struct SelfDrafted {
  LoadedModel loaded;
  DraftedSessions sessions;
};
SelfDrafted SelfDraftedOrDie(const std::string& model, const std::string& dtype) {
  EngineOptions options = TinyOptions(model);
  options.spec_method = "draft";
  options.draft_model = "self";
  options.draft_dtype = dtype;
  SelfDrafted out;
  out.loaded = LoadOrDie(options);
  if (out.loaded.weights == nullptr) return out;
  auto session_options = SessionOptionsFor(options, out.loaded);
  EXPECT_TRUE(session_options.ok()) << session_options.status().ToString();
  if (!session_options.ok()) return out;
  auto drafted = CreateDraftedSessions(options, out.loaded, *session_options);
  EXPECT_TRUE(drafted.ok()) << drafted.status().ToString();
  if (drafted.ok()) out.sessions = std::move(drafted).value();
  return out;
}

// The proposer on its own: drafts equal the model's greedy continuation,
// a rejected draft is rolled back and the cache catches up, and forgetting
// a sequence gives its blocks back.
TEST(DraftModelTest, ProposerFollowsTheSequenceAndReleasesItsCache) {
  SelfDrafted drafted = SelfDraftedOrDie("tiny-qwen2", "");
  ASSERT_NE(drafted.sessions.proposer, nullptr);
  const LoadedModel& loaded = drafted.loaded;
  DraftModelProposer& proposer = *drafted.sessions.proposer;
  EXPECT_EQ(proposer.blocks().num_blocks(), drafted.sessions.target->num_kv_blocks());

  // The model's own greedy continuation of two prompts.
  EngineOptions plain_options = TinyOptions("tiny-qwen2");
  auto plain = EngineOrDie(loaded, plain_options);
  ASSERT_NE(plain, nullptr);
  std::vector<int32_t> text = engine_test::HeldoutIds("tiny-qwen2");
  const std::vector<int32_t> prompt_a(text.begin() + 40, text.begin() + 90);
  const std::vector<int32_t> prompt_b(text.begin() + 500, text.begin() + 537);
  auto greedy = plain->Generate({engine_test::GreedyIds(prompt_a, 24), engine_test::GreedyIds(prompt_b, 24)});
  ASSERT_TRUE(greedy.ok());
  const std::vector<int32_t>& next_a = (*greedy)[0].output_ids;
  const std::vector<int32_t>& next_b = (*greedy)[1].output_ids;

  SamplingParams params;
  params.temperature = 0;
  Sequence a(1, prompt_a, params);
  Sequence b(2, prompt_b, params);
  std::vector<DraftRequest> requests = {{.seq = &a, .max_tokens = 5}, {.seq = &b, .max_tokens = 3}};
  proposer.Propose(requests);
  EXPECT_EQ(a.draft, std::vector<int32_t>(next_a.begin(), next_a.begin() + 5));
  EXPECT_EQ(b.draft, std::vector<int32_t>(next_b.begin(), next_b.begin() + 3));
  EXPECT_EQ(proposer.num_tracked(), 2);

  // a accepts two draft tokens and gets the model's third; b goes on with
  // two tokens the draft never proposed (as if it had decoded twice without
  // asking for a draft), so its draft cache must drop its draft tokens and
  // run those two.
  a.tokens.insert(a.tokens.end(), next_a.begin(), next_a.begin() + 3);
  b.tokens.push_back(next_b[0] == 7 ? 8 : 7);
  b.tokens.push_back(next_b[1] == 9 ? 10 : 9);
  proposer.Propose(requests);
  EXPECT_EQ(a.draft, std::vector<int32_t>(next_a.begin() + 3, next_a.begin() + 8));
  auto b_continued = plain->Generate({engine_test::GreedyIds(b.tokens, 3)});
  ASSERT_TRUE(b_continued.ok());
  EXPECT_EQ(b.draft, (*b_continued)[0].output_ids);

  // Greedy drafts are certainties: no distribution rows (rejection
  // sampling then takes q as a point mass).
  a.draft_probs = {{0.5f}};  // stale rows are dropped
  std::vector<DraftRequest> again = {{.seq = &a, .max_tokens = 2}};
  proposer.Propose(again);
  ASSERT_EQ(a.draft.size(), 2u);
  EXPECT_TRUE(a.draft_probs.empty());

  // A prompt taken in beside the target's prefill, in two chunks: the first
  // draft runs only its last token and proposes what the model would.
  Sequence c(3, prompt_b, params);
  const int32_t before = proposer.blocks().num_used_blocks();
  std::vector<PrefillRequest> first_chunk = {{.seq = &c, .num_tokens = 20}};
  proposer.Prefill(first_chunk);
  std::vector<PrefillRequest> second_chunk = {
      {.seq = &c, .num_tokens = static_cast<int32_t>(prompt_b.size())}};
  proposer.Prefill(second_chunk);
  EXPECT_EQ(proposer.blocks().num_used_blocks() - before,
            proposer.blocks().BlocksForTokens(static_cast<int64_t>(prompt_b.size()) - 1));
  std::vector<DraftRequest> for_c = {{.seq = &c, .max_tokens = 3}};
  proposer.Propose(for_c);
  EXPECT_EQ(c.draft, std::vector<int32_t>(next_b.begin(), next_b.begin() + 3));
  proposer.Forget(c.id);

  // b was not asked this time; its cache stays until forgotten.
  EXPECT_EQ(proposer.num_tracked(), 2);
  proposer.Forget(a.id);
  proposer.Forget(b.id);
  proposer.Forget(b.id);  // unknown ids are ignored
  EXPECT_EQ(proposer.num_tracked(), 0);
  EXPECT_EQ(proposer.blocks().num_used_blocks(), 0);
}

// The proposer tells drafting apart from catching up: a pass that brings a
// cache up to date over a prompt, or over tokens decoded while the
// sequence drafted nothing, is catch-up (timed, and not a draft pass); the
// passes that propose a token after at most the steady state's two unseen
// tokens are draft passes.
TEST(DraftModelTest, ProposerTimesCatchingUpApartFromDrafting) {
  SelfDrafted drafted = SelfDraftedOrDie("tiny-llama", "q4_0");
  ASSERT_NE(drafted.sessions.proposer, nullptr);
  DraftModelProposer& proposer = *drafted.sessions.proposer;

  std::vector<int32_t> text = engine_test::HeldoutIds("tiny-llama");
  SamplingParams params;
  params.temperature = 0;
  Sequence a(1, std::vector<int32_t>(text.begin() + 40, text.begin() + 90), params);
  std::vector<DraftRequest> requests = {{.seq = &a, .max_tokens = 4}};

  // The prompt, never taken in beside a prefill: caught up, then three
  // passes for the draft tokens after the first.
  proposer.Propose(requests);
  ASSERT_EQ(a.draft.size(), 4u);
  DraftTiming t = proposer.last_timing();
  EXPECT_EQ(t.catch_up_tokens, 50);  // the last token's logits propose the first draft token
  EXPECT_GT(t.catch_up_seconds, 0);
  EXPECT_EQ(t.draft_passes, 3);
  EXPECT_GT(t.draft_seconds, 0);
  EXPECT_EQ(t.catch_up_drafts, 1);  // the first draft token came with the catching up

  // All four accepted and the model's own next token: the draft runs the
  // fourth draft token and that one, and proposes: a draft pass.
  a.tokens.insert(a.tokens.end(), a.draft.begin(), a.draft.end());
  a.tokens.push_back(a.draft[0]);
  proposer.Propose(requests);
  t = proposer.last_timing();
  EXPECT_EQ(t.catch_up_tokens, 0);
  EXPECT_EQ(t.catch_up_seconds, 0);
  EXPECT_EQ(t.draft_passes, 4);
  EXPECT_EQ(t.catch_up_drafts, 0);

  // Twelve tokens decoded without drafts (a pause), the first of them not
  // the draft's: catching up over them is no draft pass.
  a.tokens.push_back(a.draft[0] == 7 ? 8 : 7);
  for (int i = 1; i < 12; ++i) a.tokens.push_back(text[static_cast<size_t>(200 + i)]);
  proposer.Propose(requests);
  t = proposer.last_timing();
  EXPECT_EQ(t.catch_up_tokens, 12);
  EXPECT_GT(t.catch_up_seconds, 0);
  EXPECT_EQ(t.draft_passes, 3);
  EXPECT_EQ(t.catch_up_drafts, 1);
  proposer.Forget(a.id);
}

TEST(DraftModelTest, KvBudgetIsSharedInProportionToBlockBytes) {
  ModelSessionOptions options;
  options.block_size = 16;
  options.kv_cache_memory.bytes = 1000;
  auto blocks = SharedKvCacheBlocks(options, 2048, 30, 20);
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(*blocks, 20);  // 20 * 30 + 20 * 20 = 1000 bytes
  options.kv_cache_memory.bytes = 49;
  auto none = SharedKvCacheBlocks(options, 2048, 30, 20);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("raise --kv-cache-memory"), std::string::npos);
}

TEST(DraftModelTest, SplitIsSetAtStart) {
  EngineOptions options = TinyOptions("tiny-qwen3");
  LoadedModel loaded = LoadOrDie(options);
  ASSERT_NE(loaded.weights, nullptr);
  const int64_t target_block = BlockBytes(loaded, options);
  EngineOptions draft_options = TinyOptions("tiny-qwen2");
  const int64_t draft_block = BlockBytes(LoadOrDie(draft_options), draft_options);
  ASSERT_GT(draft_block, 0);
  options.spec_method = "draft";
  options.draft_model = testing::ModelDir("tiny-qwen2");
  options.kv_cache_memory.bytes = 100 * (target_block + draft_block) + 7;
  auto engine = EngineOrDie(loaded, options);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->num_kv_blocks(), 100);
}

TEST(DraftModelTest, BadDraftOptionsAreRefused) {
  auto error = [](const EngineOptions& options) {
    auto engine = LLMEngine::Create(options);
    EXPECT_FALSE(engine.ok());
    return engine.ok() ? std::string() : engine.status().ToString();
  };
  EngineOptions options = TinyOptions("tiny-qwen2");
  options.spec_method = "draft";
  options.draft_model = testing::ModelDir("tiny-qwen2") + "/no-such-draft";
  std::string message = error(options);
  EXPECT_NE(message.find("draft model"), std::string::npos) << message;
  EXPECT_NE(message.find("no-such-draft"), std::string::npos) << message;

  // tiny-llama's tokenizer is another, of the same size.
  options.draft_model = testing::ModelDir("tiny-llama");
  message = error(options);
  EXPECT_NE(message.find("vocabulary differs"), std::string::npos) << message;
  EXPECT_NE(message.find("tiny-llama"), std::string::npos) << message;
  EXPECT_NE(message.find("tiny-qwen2"), std::string::npos) << message;

  options.draft_model = testing::ModelDir("tiny-qwen3");
  options.draft_dtype = "q4_0";
  message = error(options);
  EXPECT_NE(message.find("--draft-dtype needs --draft-model self"), std::string::npos) << message;

  options.draft_model = "self";
  options.draft_dtype = "q3_k";
  message = error(options);
  EXPECT_NE(message.find("draft dtype 'q3_k'"), std::string::npos) << message;

  options.draft_dtype.clear();
  options.draft_model.clear();
  message = error(options);
  EXPECT_NE(message.find("needs a draft model"), std::string::npos) << message;

  options.spec_method = "ngram";
  options.draft_model = "self";
  message = error(options);
  EXPECT_NE(message.find("--draft-model needs --spec-method draft"), std::string::npos) << message;
}

// A self draft at q4_0 shares nothing with the target but the tokenizer:
// its matrices are q4_0 copies, its vectors the target's values.
TEST(DraftModelTest, SelfQ4_0IsAQuantizedCopy) {
  EngineOptions options = TinyOptions("tiny-qwen3");
  options.spec_method = "draft";
  options.draft_model = "self";
  options.draft_dtype = "q4_0";
  LoadedModel loaded = LoadOrDie(options);
  ASSERT_NE(loaded.weights, nullptr);
  auto draft = LoadDraftModel(options, loaded);
  ASSERT_TRUE(draft.ok()) << draft.status().ToString();
  EXPECT_EQ(draft->tokenizer, loaded.tokenizer);
  EXPECT_NE(draft->weights, loaded.weights);
  ASSERT_EQ(draft->weights->weights().size(), loaded.weights->weights().size());
  for (const Weight& w : loaded.weights->weights()) {
    const Weight* d = draft->weights->Find(w.name);
    ASSERT_NE(d, nullptr) << w.name;
    EXPECT_EQ(d->shape, w.shape);
    EXPECT_NE(d->data, w.data);
    EXPECT_EQ(d->dtype, w.shape.size() == 2 ? DType::kQ4_0 : w.dtype) << w.name;
  }
}

}  // namespace draft_model_tests
}  // namespace kiln
