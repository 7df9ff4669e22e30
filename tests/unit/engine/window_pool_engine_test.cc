// The engine with a window pool for Gemma's sliding-window layers: tiny
// Gemma 2 and Gemma 3 models (generated weights) with a 32-token window,
// prompts of several windows run in chunks and batched, give the same
// greedy tokens and the same log-probabilities, bit for bit, with the
// window blocks freed as without, while no sequence holds more window
// blocks than its window needs; with an int8 KV cache too.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "backend/kv_cache.h"
#include "backend/forward_batch.h"
#include "engine/llm_engine.h"
#include "engine/model_loader.h"
#include "engine/model_session.h"
#include "engine/model_session_options.h"
#include "testing/test_paths.h"

namespace kiln {
namespace window_pool_engine_tests {

constexpr int32_t kWindow = 32;
constexpr int32_t kBlock = 16;
constexpr int32_t kLayers = 4;  // sliding, full, sliding, full

std::string WriteTinyGemma(const std::string& arch) {
  nlohmann::json c = {
      {"hidden_size", 64},        {"intermediate_size", 128},  {"num_hidden_layers", kLayers},
      {"num_attention_heads", 2}, {"num_key_value_heads", 1},  {"head_dim", 32},
      {"vocab_size", 512},        {"max_position_embeddings", 1024}, {"rms_norm_eps", 1e-6},
      {"query_pre_attn_scalar", 32}, {"sliding_window", kWindow}, {"hidden_activation", "gelu_pytorch_tanh"},
      {"tie_word_embeddings", true}, {"bos_token_id", 2},        {"eos_token_id", 1},
      {"torch_dtype", "float32"}};
  if (arch == "gemma2") {
    c.update({{"architectures", {"Gemma2ForCausalLM"}},
              {"model_type", "gemma2"},
              {"rope_theta", 10000.0},
              {"attn_logit_softcapping", 50.0},
              {"final_logit_softcapping", 30.0}});
  } else {
    c.update({{"architectures", {"Gemma3ForCausalLM"}},
              {"model_type", "gemma3_text"},
              {"rope_theta", 1000000.0},
              {"rope_local_base_freq", 10000.0},
              {"sliding_window_pattern", 2}});
  }
  const std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/config.json") << c.dump(2);
  return dir;
}

// A cache of `blocks` blocks of every layer (48: three of the prompts
// below at once; 12: one).
EngineOptions TinyGemmaOptions(const std::string& dir, bool window_free, DType kv_dtype, int64_t blocks = 48) {
  EngineOptions o;
  o.model = dir;
  o.load_format = "dummy";
  o.dummy_dtype = DType::kF32;
  o.dummy_seed = 7;
  o.threads = 2;
  o.block_size = kBlock;
  o.kv_cache_dtype = kv_dtype;
  o.kv_window_free = window_free;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 64;
  o.max_prefill_chunk = 24;
  o.max_model_len = 1024;
  o.kv_cache_memory.bytes = blocks * 2 * kLayers * kBlock * (kv_dtype == DType::kI8 ? 32 + 4 : 32 * 4);
  o.seed = 1;
  return o;
}

std::vector<int32_t> RandomIds(std::mt19937& rng, int32_t n) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n; ++i) ids.push_back(std::uniform_int_distribution<int32_t>(3, 511)(rng));
  return ids;
}

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // the chosen token's and the top 5 of each step
};

struct Run {
  std::vector<Output> outputs;
  int32_t window_blocks = 0;
  int64_t most_window_blocks_per_seq = 0;
  int64_t most_window_blocks_used = 0;
  int64_t preemptions = 0;
  int64_t draft_tokens = 0;
};

// Runs `prompts` in rounds (each round's requests batched; a later round
// may hit the prefix cache of an earlier one), stepping the engine by hand
// to read its counters after every step.
Run Generate(const EngineOptions& options, const std::vector<std::vector<std::vector<int32_t>>>& rounds) {
  Run run;
  auto engine = LLMEngine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return run;
  run.window_blocks = (*engine)->num_window_kv_blocks();
  for (const auto& prompts : rounds) {
    const size_t first = run.outputs.size();
    run.outputs.resize(first + prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerationRequest r;
      r.prompt_ids = prompts[i];
      r.params.temperature = 0;
      r.params.max_tokens = 40;
      r.params.ignore_eos = true;
      r.params.logprobs = true;
      r.params.top_logprobs = 5;
      Output* out = &run.outputs[first + i];
      r.on_token = [out](const TokenEvent& e) {
        if (e.token < 0) return;
        out->tokens.push_back(e.token);
        out->logprobs.push_back(e.logprob);
        for (const TokenLogprob& t : e.top_logprobs) out->logprobs.push_back(t.logprob);
      };
      auto id = (*engine)->AddRequest(std::move(r));
      EXPECT_TRUE(id.ok()) << id.status().ToString();
    }
    while ((*engine)->HasUnfinishedRequests()) {
      Status s = (*engine)->Step();
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return run;
      const EngineCounters c = (*engine)->Counters();
      run.most_window_blocks_per_seq = std::max(run.most_window_blocks_per_seq, c.kv_window_blocks_per_seq_max);
      run.most_window_blocks_used = std::max(run.most_window_blocks_used, c.kv_window_blocks_used);
      run.preemptions = c.num_preemptions;
      run.draft_tokens = c.spec_draft_tokens;
    }
  }
  return run;
}

void ExpectWindowFreeingChangesNothing(const std::string& arch, DType kv_dtype, int64_t blocks = 48,
                                       const std::string& spec_method = "none") {
  const std::string dir = WriteTinyGemma(arch);
  std::mt19937 rng(11);
  const std::vector<int32_t> a = RandomIds(rng, 150), b = RandomIds(rng, 131), c = RandomIds(rng, 97);
  // The second round shares 120 tokens with a (7 whole blocks cached).
  std::vector<int32_t> d(a.begin(), a.begin() + 120);
  for (int32_t id : RandomIds(rng, 30)) d.push_back(id);
  const std::vector<std::vector<std::vector<int32_t>>> rounds = {{a, b, c}, {d}};

  EngineOptions kept_options = TinyGemmaOptions(dir, /*window_free=*/false, kv_dtype, blocks);
  EngineOptions freed_options = TinyGemmaOptions(dir, /*window_free=*/true, kv_dtype, blocks);
  kept_options.spec_method = freed_options.spec_method = spec_method;
  const Run kept = Generate(kept_options, rounds);
  const Run freed = Generate(freed_options, rounds);
  EXPECT_EQ(kept.window_blocks, 0);
  ASSERT_GT(freed.window_blocks, 0) << "no window pool";
  ASSERT_EQ(kept.outputs.size(), freed.outputs.size());
  for (size_t i = 0; i < kept.outputs.size(); ++i) {
    EXPECT_EQ(kept.outputs[i].tokens.size(), 40u) << "request " << i;
    EXPECT_EQ(kept.outputs[i].tokens, freed.outputs[i].tokens) << "request " << i;
    // Bit for bit: the same keys and values, read in the same order.
    EXPECT_EQ(kept.outputs[i].logprobs, freed.outputs[i].logprobs) << "request " << i;
  }
  // Between steps a sequence holds the window of its next query: positions
  // (c - 32, c], at most ceil(31 / 16) + 1 blocks.
  const int32_t bound = (kWindow - 1 + kBlock - 1) / kBlock + 1;
  EXPECT_LE(freed.most_window_blocks_per_seq, bound);
  EXPECT_GE(freed.most_window_blocks_per_seq, 2);
  EXPECT_LE(freed.most_window_blocks_used, 3 * bound);
  if (spec_method != "none") {
    EXPECT_GT(freed.draft_tokens, 0) << "nothing drafted";
  }
  if (blocks < 48) {
    // The small cache runs out (of the window pool of 7 blocks, or the full
    // one of 17): recomputed sequences give the same output too.
    EXPECT_GT(freed.preemptions, 0);
  }
}

TEST(WindowPoolEngine, Gemma3FreesWindowBlocksAndGeneratesTheSame) {
  ExpectWindowFreeingChangesNothing("gemma3", DType::kF32);
}

TEST(WindowPoolEngine, Gemma2FreesWindowBlocksAndGeneratesTheSame) {
  ExpectWindowFreeingChangesNothing("gemma2", DType::kF32);
}

TEST(WindowPoolEngine, Int8CacheFreesWindowBlocksAndGeneratesTheSame) {
  ExpectWindowFreeingChangesNothing("gemma3", DType::kI8);
}

TEST(WindowPoolEngine, AWindowPoolThatRunsOutPreemptsAndGeneratesTheSame) {
  ExpectWindowFreeingChangesNothing("gemma3", DType::kF32, /*blocks=*/12);
}

// Drafts take window slots beyond the computed tokens; the rejected ones
// are given back.
TEST(WindowPoolEngine, SpeculativeDecodingFreesWindowBlocksAndGeneratesTheSame) {
  ExpectWindowFreeingChangesNothing("gemma3", DType::kF32, 48, "ngram");
}

TEST(WindowPoolEngine, TheFullPoolGetsTheRoomTheWindowPoolSaves) {
  const std::string dir = WriteTinyGemma("gemma3");
  auto kept = LLMEngine::Create(TinyGemmaOptions(dir, false, DType::kF32));
  auto freed = LLMEngine::Create(TinyGemmaOptions(dir, true, DType::kF32));
  ASSERT_TRUE(kept.ok() && freed.ok());
  EXPECT_EQ((*kept)->num_kv_blocks(), 48);
  // The window pool: 4 + (64 + 4 * 46) / 16 = 19 blocks of the two sliding
  // layers; the rest of 48 blocks of four layers to the two full ones.
  EXPECT_EQ((*freed)->num_window_kv_blocks(), 19);
  EXPECT_EQ((*freed)->num_kv_blocks(), 96 - 19);
  EXPECT_EQ((*freed)->kv_cache().TotalBytes(), (*kept)->kv_cache().TotalBytes());

  // A budget of 12 blocks holds fewer than the 19 that never run out: the
  // window pool gets half of 12, but no fewer than the 1 + (64 + 46) / 16
  // = 7 one sequence may need; the rest of the bytes go to the full pool.
  auto small = LLMEngine::Create(TinyGemmaOptions(dir, true, DType::kF32, 12));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)->num_window_kv_blocks(), 7);
  EXPECT_EQ((*small)->num_kv_blocks(), (48 - 2 * 7) / 2);
  // Six blocks hold no more than one pool would: none.
  auto tiny = LLMEngine::Create(TinyGemmaOptions(dir, true, DType::kF32, 6));
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ((*tiny)->num_window_kv_blocks(), 0);
  EXPECT_EQ((*tiny)->num_kv_blocks(), 6);
}

// A session with a window pool takes passes with window block tables only,
// whose entries the pass's queries see must be blocks of the window pool.
TEST(WindowPoolEngine, ASessionWithAWindowPoolChecksTheWindowTables) {
  const EngineOptions options = TinyGemmaOptions(WriteTinyGemma("gemma3"), true, DType::kF32);
  auto loaded = LoadModel(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto session_options = SessionOptionsFor(options, *loaded);
  ASSERT_TRUE(session_options.ok());
  session_options->kv_window_pool = true;
  auto session = ModelSession::Create(*loaded->weights, *session_options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_EQ((*session)->num_window_kv_blocks(), 19);

  // One sequence: position 47 (sees 16..47) after 47 cached tokens.
  const int32_t token = 5, position = 47, seq_len = 48, query_start[2] = {0, 1}, token_seq = 0, row = 0;
  const int32_t full_table[3] = {0, 1, 2};
  int32_t window_table[3] = {-1, 3, 4};
  const int32_t* tables[1] = {full_table};
  const int32_t* window_tables[1] = {window_table};
  ForwardBatch b;
  b.num_tokens = 1;
  b.token_ids = &token;
  b.positions = &position;
  b.token_seq = &token_seq;
  b.num_seqs = 1;
  b.query_start = query_start;
  b.seq_lens = &seq_len;
  b.block_tables = tables;
  b.num_output_rows = 1;
  b.output_rows = &row;
  std::vector<float> logits(512);
  Status s = (*session)->Forward(b, logits.data(), 512);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();  // no window tables
  b.window_block_tables = window_tables;
  s = (*session)->Forward(b, logits.data(), 512);
  EXPECT_TRUE(s.ok()) << s.ToString();  // entry 0 (0..15) is before the window
  window_table[1] = -1;                  // 16..31: seen
  s = (*session)->Forward(b, logits.data(), 512);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  window_table[1] = 19;  // beyond the window pool
  s = (*session)->Forward(b, logits.data(), 512);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
  // A single-sequence pass has no window tables to give.
  const int32_t ids[1] = {5};
  EXPECT_EQ((*session)->ForwardSequence(ids, 0, {}, logits.data()).code(), StatusCode::kUnsupported);
}

TEST(WindowPoolEngine, AModelWithoutSlidingLayersHasNoWindowPool) {
  EngineOptions o;
  o.model = testing::ModelDir("tiny-llama");
  o.threads = 2;
  o.kv_cache_memory.bytes = 1 << 20;
  auto engine = LLMEngine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->num_window_kv_blocks(), 0);
  EXPECT_FALSE((*engine)->kv_cache().layout().HasWindowPool());
}

}  // namespace window_pool_engine_tests
}  // namespace kiln
