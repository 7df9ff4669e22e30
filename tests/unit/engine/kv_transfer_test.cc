// Prefill/decode disaggregation inside the engine: the byte layouts of the
// handshake and of KV blocks, the refusal of a peer that differs, the
// decode side's time-out, and two engines joined by an in-process
// connector whose decoding equals one engine's, bit for bit.
#include "engine/kv_transfer.h"

#include <gtest/gtest.h>

#include <cstring>

#include <deque>
#include <mutex>
#include <numeric>

#include "backend/kv_cache.h"
#include "backend/memory_domain.h"
#include "engine/block_manager.h"
#include "engine/kv_block_copy.h"
#include "engine/kv_connector.h"
#include "engine/kv_transfer_receiver.h"
#include "engine_test_util.h"

namespace kiln {
namespace kv_transfer_tests {

KvBlockPayload SampleBlock(int32_t block_size, size_t bytes) {
  KvBlockPayload b;
  b.transfer_id = 0x1234567890abcdefull;
  b.block_index = 3;
  b.tokens.resize(static_cast<size_t>(block_size));
  std::iota(b.tokens.begin(), b.tokens.end(), 100);
  b.parent_hash = 42;
  b.hash = BlockManager::ChainHash(b.parent_hash, b.tokens);
  b.data.resize(bytes);
  for (size_t i = 0; i < bytes; ++i) b.data[i] = static_cast<uint8_t>(i * 7 + 1);
  return b;
}

TEST(KvTransferTest, BlockPayloadRoundTrips) {
  const KvBlockPayload b = SampleBlock(16, 1000);
  std::vector<uint8_t> bytes = SerializeBlock(b);
  auto back = DeserializeBlock(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->transfer_id, b.transfer_id);
  EXPECT_EQ(back->block_index, b.block_index);
  EXPECT_EQ(back->parent_hash, b.parent_hash);
  EXPECT_EQ(back->hash, b.hash);
  EXPECT_EQ(back->tokens, b.tokens);
  EXPECT_EQ(back->data, b.data);

  // Truncated anywhere, or with bytes left over, it is refused.
  for (size_t cut : {size_t{0}, size_t{5}, size_t{40}, bytes.size() - 1}) {
    auto bad = DeserializeBlock(std::span<const uint8_t>(bytes).first(cut));
    EXPECT_FALSE(bad.ok()) << cut;
  }
  bytes.push_back(0);
  EXPECT_FALSE(DeserializeBlock(bytes).ok());

  auto end = DeserializeTransferEnd(SerializeTransferEnd({.transfer_id = 7, .num_blocks = 9}));
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->transfer_id, 7u);
  EXPECT_EQ(end->num_blocks, 9);
  EXPECT_FALSE(DeserializeTransferEnd(SerializeBlock(b)).ok());  // another message kind
}

TEST(KvTransferTest, HandshakeRoundTripsAndRefusesADifferentPeer) {
  KvPeerIdentity here{.model_hash = "0123456789abcdef", .block_size = 16, .kv_dtype = DType::kF32,
                      .num_layers = 2, .num_kv_heads = 4, .head_dim = 8};
  auto back = DeserializeIdentity(SerializeIdentity(here));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(CheckSameIdentity(here, *back).ok());

  KvPeerIdentity there = here;
  there.block_size = 32;
  Status s = CheckSameIdentity(here, there);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("block size 16 here, 32 on the peer"), std::string::npos) << s.message();

  there = here;
  there.kv_dtype = DType::kI8;
  there.model_hash = "fedcba9876543210";
  s = CheckSameIdentity(here, there);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model hash"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("KV cache dtype"), std::string::npos) << s.message();
}

// A handshake naming a dtype kiln has not is refused, not read as one.
TEST(KvTransferTest, HandshakeWithAnUnknownDtypeIsRefused) {
  KvPeerIdentity here{.model_hash = "0123456789abcdef", .block_size = 16, .kv_dtype = DType::kF32,
                      .num_layers = 2, .num_kv_heads = 4, .head_dim = 8};
  std::vector<uint8_t> bytes = SerializeIdentity(here);
  // The dtype follows the magic, version, hash length, hash and block size.
  const size_t at = 4 + 4 + 4 + here.model_hash.size() + 4;
  for (int32_t dtype : {kNumDTypes, 300, -1}) {
    std::memcpy(bytes.data() + at, &dtype, sizeof(dtype));
    auto back = DeserializeIdentity(bytes);
    ASSERT_FALSE(back.ok()) << dtype;
    EXPECT_NE(back.status().message().find("no dtype"), std::string::npos) << back.status().message();
  }
}

KvCacheLayout SmallLayout(DType dtype) {
  KvCacheLayout l;
  l.num_layers = 2;
  l.num_blocks = 8;
  l.block_size = 4;
  l.num_kv_heads = 2;
  l.head_dim = 4;
  l.dtype = dtype;
  return l;
}

TEST(KvTransferTest, BlockBytesCopyOutAndBackIn) {
  for (DType dtype : {DType::kF32, DType::kI8}) {
    auto cache = KvCache::Allocate(SmallLayout(dtype), HostMemory());
    ASSERT_TRUE(cache.ok());
    KvBlockPayload b = SampleBlock(4, static_cast<size_t>(KvBlockPayloadBytes((*cache)->layout())));
    ASSERT_TRUE(WriteKvBlock(**cache, 5, b.data).ok());
    EXPECT_EQ(ReadKvBlock(**cache, 5), b.data);
    EXPECT_NE(ReadKvBlock(**cache, 4), b.data);  // the neighbours are untouched (zero)
    b.data.pop_back();
    EXPECT_FALSE(WriteKvBlock(**cache, 5, b.data).ok());
  }
}

TEST(KvTransferTest, QuietTransfersHaveTheirBlocksFreedAfterTheTimeout) {
  auto cache = KvCache::Allocate(SmallLayout(DType::kF32), HostMemory());
  ASSERT_TRUE(cache.ok());
  BlockManager bm(8, 4, /*enable_prefix_caching=*/true);
  KvTransferReceiver receiver(bm, **cache, /*timeout_seconds=*/30);
  const auto bytes = static_cast<size_t>(KvBlockPayloadBytes((*cache)->layout()));

  // Transfer 1 lands two blocks and never ends.
  KvBlockPayload b0 = SampleBlock(4, bytes);
  b0.transfer_id = 1;
  b0.parent_hash = BlockManager::kRootHash;
  b0.hash = BlockManager::ChainHash(b0.parent_hash, b0.tokens);
  KvBlockPayload b1 = b0;
  b1.block_index = 1;
  std::iota(b1.tokens.begin(), b1.tokens.end(), 200);
  b1.parent_hash = b0.hash;
  b1.hash = BlockManager::ChainHash(b1.parent_hash, b1.tokens);
  ASSERT_TRUE(receiver.Install(b0, 100.0).ok());
  ASSERT_TRUE(receiver.Install(b1, 101.0).ok());
  EXPECT_EQ(bm.num_used_blocks(), 2);
  EXPECT_TRUE(receiver.Expire(130.0).empty());  // 29 s quiet: still waiting
  EXPECT_EQ(receiver.Expire(131.5), std::vector<uint64_t>{1});
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(receiver.num_open_transfers(), 0);

  // A block whose hash is not its tokens' is refused, and its transfer
  // ends incomplete.
  KvBlockPayload bad = b0;
  bad.transfer_id = 2;
  bad.hash ^= 1;
  EXPECT_FALSE(receiver.Install(bad, 200.0).ok());
  EXPECT_FALSE(receiver.End({.transfer_id = 2, .num_blocks = 1}));

  // A complete transfer leaves its blocks in the prefix cache, unheld.
  KvBlockPayload c = b0;
  c.transfer_id = 3;
  std::iota(c.tokens.begin(), c.tokens.end(), 300);
  c.hash = BlockManager::ChainHash(c.parent_hash, c.tokens);
  ASSERT_TRUE(receiver.Install(c, 300.0).ok());
  EXPECT_TRUE(receiver.End({.transfer_id = 3, .num_blocks = 1}));
  EXPECT_EQ(bm.num_used_blocks(), 0);
  Sequence seq(0, {300, 301, 302, 303, 9}, {});
  CachedPrefix prefix = bm.FindCachedPrefix(seq);
  EXPECT_EQ(prefix.num_tokens, 4);
}

// Joins two engines in this process: what one sends, the other takes.
class LoopbackConnector : public KvConnector {
 public:
  struct Wire {
    std::mutex mu;
    KvLanded in_flight;
    std::vector<std::pair<uint64_t, bool>> acks;
  };
  // `receiving`: the decode end (the other end's TakeLanded is empty).
  LoopbackConnector(std::shared_ptr<Wire> wire, bool receiving) : wire_(std::move(wire)), receiving_(receiving) {}

  void Send(KvBlockPayload block) override {
    // Through the byte layout, as a transport would carry it.
    auto copy = DeserializeBlock(SerializeBlock(block));
    std::lock_guard<std::mutex> lock(wire_->mu);
    wire_->in_flight.blocks.push_back(std::move(copy).value());
  }
  void EndTransfer(const KvTransferEnd& end) override {
    std::lock_guard<std::mutex> lock(wire_->mu);
    wire_->in_flight.ends.push_back(end);
  }
  Status WaitAcknowledged(uint64_t, double) override { return Status::Ok(); }
  KvLanded TakeLanded() override {
    if (!receiving_) return {};
    std::lock_guard<std::mutex> lock(wire_->mu);
    return std::exchange(wire_->in_flight, {});
  }
  void Acknowledge(uint64_t transfer_id, bool ok) override {
    std::lock_guard<std::mutex> lock(wire_->mu);
    wire_->acks.emplace_back(transfer_id, ok);
  }
  void SetLandedCallback(std::function<void()>) override {}

 private:
  std::shared_ptr<Wire> wire_;
  bool receiving_;
};

std::vector<int32_t> Greedy(LLMEngine& engine, std::vector<int32_t> prompt, int max_tokens, uint64_t transfer = 0) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.kv_transfer_id = transfer;
  std::vector<GenerationRequest> rs;
  rs.push_back(std::move(r));
  auto results = engine.Generate(std::move(rs));
  EXPECT_TRUE(results.ok()) << results.status().ToString();
  return results.ok() ? (*results)[0].output_ids : std::vector<int32_t>{};
}

TEST(KvTransferTest, DecodingAfterATransferEqualsOneEngine) {
  const std::vector<int32_t> text = engine_test::HeldoutIds("tiny-llama");
  for (DType dtype : {DType::kF32, DType::kI8}) {
    EngineOptions o = engine_test::TinyOptions("tiny-llama");
    o.kv_cache_dtype = dtype;
    o.max_prefill_chunk = 24;  // several passes per prompt, blocks sent after each
    LoadedModel model = engine_test::LoadOrDie(o);
    auto single = engine_test::EngineOrDie(model, o);
    auto prefill = engine_test::EngineOrDie(model, o);
    auto decode = engine_test::EngineOrDie(model, o);
    ASSERT_TRUE(single && prefill && decode);
    auto wire = std::make_shared<LoopbackConnector::Wire>();
    ASSERT_TRUE(prefill->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, false), 30).ok());
    ASSERT_TRUE(decode->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, true), 30).ok());

    uint64_t transfer = 100;
    for (size_t length : {size_t{37}, size_t{64}, size_t{90}}) {
      SCOPED_TRACE(fmt::format("{} tokens, {} cache", length, DTypeName(dtype)));
      std::vector<int32_t> prompt(text.begin() + static_cast<std::ptrdiff_t>(length),
                                  text.begin() + static_cast<std::ptrdiff_t>(2 * length));
      const std::vector<int32_t> expected = Greedy(*single, prompt, 12);
      Greedy(*prefill, prompt, 1, ++transfer);
      ASSERT_TRUE(decode->Step().ok());  // takes the blocks in
      {
        std::lock_guard<std::mutex> lock(wire->mu);
        ASSERT_EQ(wire->acks.size(), 1u);
        EXPECT_EQ(wire->acks[0], std::make_pair(transfer, true));
        wire->acks.clear();
      }
      const int64_t hits_before = decode->Counters().prefix_cache_hits;
      EXPECT_EQ(Greedy(*decode, prompt, 12), expected);
      const int64_t full_blocks = static_cast<int64_t>((length - 1) / 16);
      EXPECT_EQ(decode->Counters().prefix_cache_hits - hits_before, full_blocks * 16);
    }
    EXPECT_GT(prefill->Counters().kv_blocks_sent, 0);
    EXPECT_EQ(decode->Counters().kv_blocks_received, prefill->Counters().kv_blocks_sent);
    EXPECT_EQ(decode->Counters().kv_blocks_used, 0);
  }
}

TEST(KvTransferTest, ATransferNeedsAConnector) {
  EngineOptions o = engine_test::TinyOptions("tiny-llama");
  LoadedModel model = engine_test::LoadOrDie(o);
  auto engine = engine_test::EngineOrDie(model, o);
  ASSERT_TRUE(engine);
  GenerationRequest r;
  r.prompt_ids = {1, 2, 3};
  r.kv_transfer_id = 5;
  auto added = engine->AddRequest(std::move(r));
  ASSERT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("KV connector"), std::string::npos);
}

}  // namespace kv_transfer_tests
}  // namespace kiln
