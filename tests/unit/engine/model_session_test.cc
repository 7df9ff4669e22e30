// ModelSession and its options: the one translation of the engine's options
// into the compiler's, the KV cache's sizing, forward passes over a single
// sequence against one pass over all of it, and the per-layer callback of a
// pass.
#include "engine/model_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
#include "engine/engine_options.h"
#include "engine/model_loader.h"
#include "format/weight_store.h"
#include "testing/test_paths.h"

namespace kiln {
namespace model_session_tests {

std::unique_ptr<WeightStore> TinyQwen2() {
  auto weights = WeightStore::Open(testing::ModelDir("tiny-qwen2"));
  EXPECT_TRUE(weights.ok()) << weights.status().ToString();
  return weights.ok() ? std::move(weights).value() : nullptr;
}

TEST(ModelSessionOptions, TheEnginesOptionsBecomeTheCompilers) {
  EngineOptions e;
  e.model = "m";
  e.backend = "testaccel";
  e.precision = Precision::kBf16;
  e.threads = 3;
  e.max_num_batched_tokens = 96;
  e.max_model_len = 300;
  e.max_num_seqs = 7;
  e.block_size = 32;
  e.kv_cache_dtype = DType::kF16;
  e.kv_cache_memory.bytes = 12345;
  auto s = SessionOptionsFor(e, LoadedModel{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kv_cache_memory.bytes, 12345);
  EXPECT_EQ(s->kv_tokens_per_seq, 0);
  const CompileOptions c = ToCompileOptions(*s);
  EXPECT_EQ(c.backend, "testaccel");
  EXPECT_EQ(c.precision, Precision::kBf16);
  EXPECT_EQ(c.fuse.precision, Precision::kBf16);
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.max_batch_tokens, 96);
  EXPECT_EQ(c.max_model_len, 300);
  EXPECT_EQ(c.max_seqs, 7);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.kv_dtype, DType::kF16);
  EXPECT_FALSE(c.w8a8.enabled);
  // W8A8 needs the weights to calibrate on, or at least to be given.
  e.w8a8 = true;
  EXPECT_FALSE(SessionOptionsFor(e, LoadedModel{}).ok());
}

TEST(ModelSessionOptions, KvCacheSizing) {
  auto weights = TinyQwen2();
  ASSERT_NE(weights, nullptr);
  ModelSessionOptions o;
  o.threads = 2;
  o.max_batch_tokens = 32;
  o.max_seqs = 3;
  o.block_size = 16;
  auto model = CompileForSession(*weights, o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int64_t block_bytes = (*model)->MakeKvLayout(1).BlockBytes();

  // Room for every sequence: 3 sequences of 40 tokens, 3 blocks each.
  o.kv_tokens_per_seq = 40;
  auto blocks = KvCacheBlocks(o, **model);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(*blocks, 9);

  // By bytes: whole blocks only.
  o.kv_tokens_per_seq = 0;
  o.kv_cache_memory.bytes = 5 * block_bytes + block_bytes / 2;
  blocks = KvCacheBlocks(o, **model);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(*blocks, 5);
  o.kv_cache_memory.bytes = block_bytes - 1;
  blocks = KvCacheBlocks(o, **model);
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(blocks.status().message().find("holds no block"), std::string::npos) << blocks.status().message();
}

TEST(ModelSession, CompilesAndAllocatesItsKvCacheInTheAttentionBackendsMemory) {
  auto weights = TinyQwen2();
  ASSERT_NE(weights, nullptr);
  ModelSessionOptions o;
  o.threads = 2;
  o.max_seqs = 2;
  o.max_batch_tokens = 64;
  o.kv_tokens_per_seq = 100;
  auto session = ModelSession::Create(*weights, o);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ((*session)->num_kv_blocks(), 2 * 7);
  EXPECT_EQ((*session)->max_batch_tokens(), 64);
  EXPECT_EQ((*session)->model().kv_cache_domain().id(), HostMemory().id());
  EXPECT_EQ((*session)->kv_cache().layout().num_blocks, (*session)->num_kv_blocks());

  // The batch limit is checked in one place, whoever states it.
  o.max_batch_tokens = 0;
  auto none = ModelSession::Create(*weights, o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("max_batch_tokens must be in [1, 65536], got 0"), std::string::npos)
      << none.status().message();
}

// fp32, one sequence of up to 32 tokens, two threads.
ModelSessionOptions OneSequenceOf32Tokens() {
  ModelSessionOptions o;
  o.precision = Precision::kFp32;
  o.threads = 2;
  o.max_seqs = 1;
  o.max_batch_tokens = 32;
  o.kv_tokens_per_seq = 32;
  return o;
}

// A sequence run in passes of 5 tokens gives the logits of one pass over
// all of it, bit for bit: each pass continues from the cache.
TEST(ModelSession, ForwardSequenceContinuesFromTheCache) {
  auto weights = TinyQwen2();
  ASSERT_NE(weights, nullptr);
  auto created = ModelSession::Create(*weights, OneSequenceOf32Tokens());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ModelSession& session = **created;
  const int64_t vocab = session.config().vocab_size;
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back((i * 37 + 11) % 1000 + 4);

  std::vector<int32_t> all_rows(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) all_rows[i] = static_cast<int32_t>(i);
  std::vector<float> whole(ids.size() * static_cast<size_t>(vocab));
  ASSERT_TRUE(session.ForwardSequence(ids, 0, all_rows, whole.data()).ok());

  std::vector<float> pieces(whole.size());
  for (size_t p0 = 0; p0 < ids.size(); p0 += 5) {
    const std::span<const int32_t> part(ids.data() + p0, 5);
    const std::vector<int32_t> rows = {0, 1, 2, 3, 4};
    Status s = session.ForwardSequence(part, static_cast<int32_t>(p0), rows,
                                       pieces.data() + p0 * static_cast<size_t>(vocab));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(std::memcmp(whole.data(), pieces.data(), whole.size() * sizeof(float)), 0);

  // Beyond the cache's 32 tokens: refused, nothing run.
  Status beyond = session.ForwardSequence(ids, 20, {}, nullptr);
  EXPECT_EQ(beyond.code(), StatusCode::kOutOfRange) << beyond.ToString();
}

// What the per-layer callback saw: the layers in call order, and whether
// the layer's keys were in the cache then and the next layer's not yet.
struct LayerCalls {
  const KvCache* cache = nullptr;
  size_t key_bytes = 0;  // of the batch's tokens in block 0, per layer
  std::vector<int32_t> layers;
  bool written_in_time = true;
};

bool AnyNonZero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::any_of(b, b + n, [](uint8_t x) { return x != 0; });
}

void RecordLayer(void* context, int32_t layer) {
  auto* calls = static_cast<LayerCalls*>(context);
  calls->layers.push_back(layer);
  const int64_t num_layers = calls->cache->layout().num_layers;
  if (!AnyNonZero(calls->cache->keys(layer), calls->key_bytes)) calls->written_in_time = false;
  if (layer + 1 < num_layers && AnyNonZero(calls->cache->keys(layer + 1), calls->key_bytes)) {
    calls->written_in_time = false;  // the first pass: later layers are not written yet
  }
}

// Forward calls a batch's on_kv_layer_written once per layer, in layer
// order, each right after that layer's keys and values are written and
// before the next layer's; a batch without one runs as before.
TEST(ModelSession, ForwardCallsTheKvLayerCallbackAfterEachLayersWrite) {
  auto weights = TinyQwen2();
  ASSERT_NE(weights, nullptr);
  auto created = ModelSession::Create(*weights, OneSequenceOf32Tokens());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ModelSession& session = **created;
  const KvCacheLayout& layout = session.kv_cache().layout();
  const int64_t vocab = session.config().vocab_size;

  const int32_t n = 6;
  std::vector<int32_t> ids, positions, token_seq(n, 0);
  for (int32_t i = 0; i < n; ++i) {
    ids.push_back(i * 13 + 5);
    positions.push_back(i);
  }
  const int32_t query_start[2] = {0, n};
  const int32_t seq_len = n;
  const int32_t table[1] = {0};
  const int32_t* tables[1] = {table};
  const int32_t output_row = n - 1;
  ForwardBatch b;
  b.num_tokens = n;
  b.token_ids = ids.data();
  b.positions = positions.data();
  b.token_seq = token_seq.data();
  b.num_seqs = 1;
  b.query_start = query_start;
  b.seq_lens = &seq_len;
  b.block_tables = tables;
  b.num_output_rows = 1;
  b.output_rows = &output_row;
  LayerCalls calls;
  calls.cache = &session.kv_cache();
  calls.key_bytes = static_cast<size_t>(n * layout.TokenElementBytes());
  b.on_kv_layer_written = {.fn = &RecordLayer, .context = &calls};
  std::vector<float> logits(static_cast<size_t>(vocab));
  ASSERT_TRUE(session.Forward(b, logits.data(), vocab).ok());
  std::vector<int32_t> in_order(static_cast<size_t>(layout.num_layers));
  for (size_t l = 0; l < in_order.size(); ++l) in_order[l] = static_cast<int32_t>(l);
  EXPECT_EQ(calls.layers, in_order);
  EXPECT_TRUE(calls.written_in_time);

  // Once per layer per pass: a second pass calls each layer again.
  calls.layers.clear();
  ASSERT_TRUE(session.Forward(b, logits.data(), vocab).ok());
  EXPECT_EQ(calls.layers, in_order);

  // Without a callback, the same logits.
  std::vector<float> plain(logits.size());
  b.on_kv_layer_written = {};
  ASSERT_TRUE(session.Forward(b, plain.data(), vocab).ok());
  EXPECT_EQ(std::memcmp(plain.data(), logits.data(), plain.size() * sizeof(float)), 0);
}

}  // namespace model_session_tests
}  // namespace kiln
