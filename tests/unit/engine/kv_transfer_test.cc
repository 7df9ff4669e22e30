// Prefill/decode disaggregation inside the engine: the byte layouts of the
// handshake and of KV blocks and layer slices, the refusal of a peer that
// differs, the decode side's assembly of blocks from layer slices and its
// time-out, and two engines joined by an in-process connector (sending
// whole blocks or per layer) whose decoding equals one engine's, bit for
// bit.
#include "engine/kv_transfer.h"

#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstring>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>

#include <unistd.h>

#include "backend/kv_cache.h"
#include "backend/memory_domain.h"
#include "engine/block_manager.h"
#include "engine/kv_block_copy.h"
#include "engine/kv_connector.h"
#include "engine/kv_layer_sender.h"
#include "engine/kv_transfer_receiver.h"
#include "engine_test_util.h"
#include "format/weight_store.h"

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
  b.layer_begin = 0;
  b.layer_end = 2;  // SmallLayout's
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
  EXPECT_EQ(back->layer_begin, b.layer_begin);
  EXPECT_EQ(back->layer_end, b.layer_end);
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

TEST(KvTransferTest, LayerSliceRoundTripsAndAnEmptyRangeIsRefused) {
  KvBlockPayload b = SampleBlock(16, 100);
  b.layer_begin = 5;
  b.layer_end = 6;
  auto back = DeserializeBlock(SerializeBlock(b));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->layer_begin, 5);
  EXPECT_EQ(back->layer_end, 6);
  EXPECT_EQ(back->data, b.data);
  for (auto [begin, end] : {std::pair{3, 3}, std::pair{4, 2}, std::pair{-1, 1}}) {
    b.layer_begin = begin;
    b.layer_end = end;
    auto bad = DeserializeBlock(SerializeBlock(b));
    ASSERT_FALSE(bad.ok()) << begin << " " << end;
    EXPECT_EQ(bad.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(bad.status().message().find("layers"), std::string::npos) << bad.status().message();
  }
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
    // Layer by layer, the same bytes.
    const auto slice = static_cast<size_t>(KvLayerSliceBytes((*cache)->layout()));
    ASSERT_EQ(b.data.size(), 2 * slice);
    EXPECT_EQ(ReadKvBlockLayers(**cache, 5, 1, 2), std::vector<uint8_t>(b.data.begin() + slice, b.data.end()));
    ASSERT_TRUE(WriteKvBlockLayers(**cache, 6, 1, std::span<const uint8_t>(b.data).subspan(slice)).ok());
    EXPECT_EQ(ReadKvBlockLayers(**cache, 6, 1, 2), ReadKvBlockLayers(**cache, 5, 1, 2));
    EXPECT_NE(ReadKvBlockLayers(**cache, 6, 0, 1), ReadKvBlockLayers(**cache, 5, 0, 1));  // not written
    EXPECT_FALSE(WriteKvBlockLayers(**cache, 6, 1, b.data).ok());  // two layers from layer 1 of 2
    b.data.pop_back();
    EXPECT_FALSE(WriteKvBlock(**cache, 5, b.data).ok());
  }
}

// A block of `layout`'s shape with distinct bytes, its layer slices, and
// the receiver's view of the prefix cache.
struct SlicedBlock {
  KvBlockPayload whole;
  std::vector<KvBlockPayload> slices;  // by layer
};

SlicedBlock MakeSlicedBlock(const KvCacheLayout& layout, uint64_t transfer, int32_t first_token) {
  SlicedBlock s;
  s.whole = SampleBlock(layout.block_size, static_cast<size_t>(KvBlockPayloadBytes(layout)));
  s.whole.transfer_id = transfer;
  s.whole.block_index = 0;
  std::iota(s.whole.tokens.begin(), s.whole.tokens.end(), first_token);
  s.whole.parent_hash = BlockManager::kRootHash;
  s.whole.hash = BlockManager::ChainHash(s.whole.parent_hash, s.whole.tokens);
  s.whole.layer_end = static_cast<int32_t>(layout.num_layers);
  const auto slice = static_cast<size_t>(KvLayerSliceBytes(layout));
  for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
    KvBlockPayload p = s.whole;
    p.layer_begin = layer;
    p.layer_end = layer + 1;
    p.data.assign(s.whole.data.begin() + static_cast<std::ptrdiff_t>(layer * slice),
                  s.whole.data.begin() + static_cast<std::ptrdiff_t>((layer + 1) * slice));
    s.slices.push_back(std::move(p));
  }
  return s;
}

// Tokens found cached for a sequence of the block's tokens and one more.
int32_t CachedTokens(BlockManager& bm, const KvBlockPayload& block, std::vector<int32_t>* ids = nullptr) {
  std::vector<int32_t> tokens = block.tokens;
  tokens.push_back(1);
  Sequence seq(0, tokens, {});
  CachedPrefix prefix = bm.FindCachedPrefix(seq);
  if (ids != nullptr) *ids = prefix.blocks;
  return prefix.num_tokens;
}

TEST(KvTransferTest, ABlockAssemblesFromLayerSlicesInAnyOrderAndIsFiledAtItsLastLayer) {
  for (DType dtype : {DType::kF32, DType::kI8}) {
    KvCacheLayout layout = SmallLayout(dtype);
    layout.num_layers = 3;
    auto cache = KvCache::Allocate(layout, HostMemory());
    ASSERT_TRUE(cache.ok());
    BlockManager bm(8, 4, /*enable_prefix_caching=*/true);
    KvTransferReceiver receiver(bm, **cache, 30);
    const std::vector<std::vector<int32_t>> orders = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
    uint64_t transfer = 10;
    for (const std::vector<int32_t>& order : orders) {
      SCOPED_TRACE(fmt::format("{} cache, layers in order {}", DTypeName(dtype), fmt::join(order, ", ")));
      ++transfer;
      const SlicedBlock b = MakeSlicedBlock(layout, transfer, static_cast<int32_t>(transfer) * 10);
      for (size_t i = 0; i < order.size(); ++i) {
        // Never visible before its last layer: a pass could read it.
        EXPECT_EQ(CachedTokens(bm, b.whole), 0) << i;
        ASSERT_TRUE(receiver.Install(b.slices[static_cast<size_t>(order[i])], 1.0 + i).ok());
        EXPECT_EQ(receiver.num_partial_blocks(), i + 1 < order.size() ? 1 : 0);
      }
      std::vector<int32_t> ids;
      ASSERT_EQ(CachedTokens(bm, b.whole, &ids), 4);
      EXPECT_EQ(ReadKvBlock(**cache, ids[0]), b.whole.data);
      EXPECT_TRUE(receiver.End({.transfer_id = transfer, .num_blocks = 1}));
    }
    EXPECT_EQ(receiver.blocks_installed(), 3);
    EXPECT_EQ(receiver.layer_slices_installed(), 9);
    EXPECT_EQ(bm.num_used_blocks(), 0);  // filed, released, evictable
  }
}

TEST(KvTransferTest, BadLayerSlicesFailTheirTransferAndFreeThePartialBlock) {
  KvCacheLayout layout = SmallLayout(DType::kF32);
  layout.num_layers = 3;
  auto cache = KvCache::Allocate(layout, HostMemory());
  ASSERT_TRUE(cache.ok());
  BlockManager bm(8, 4, /*enable_prefix_caching=*/true);
  KvTransferReceiver receiver(bm, **cache, 30);
  auto expect_refused = [&](const KvBlockPayload& p, const std::string& why) {
    Status s = receiver.Install(p, 1.0);
    ASSERT_FALSE(s.ok()) << why;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  };
  const SlicedBlock b = MakeSlicedBlock(layout, 1, 500);
  ASSERT_TRUE(receiver.Install(b.slices[1], 1.0).ok());
  EXPECT_EQ(bm.num_used_blocks(), 1);
  expect_refused(b.slices[1], "layer 1 landed already");
  KvBlockPayload overlapping = b.whole;  // layers [0, 3) over the landed 1
  expect_refused(overlapping, "layer 1 landed already");
  KvBlockPayload other_tokens = MakeSlicedBlock(layout, 1, 600).slices[2];
  expect_refused(other_tokens, "differ from those of the block's first slice");
  KvBlockPayload short_slice = b.slices[2];
  short_slice.data.pop_back();
  expect_refused(short_slice, "bytes for layers [2, 3)");
  KvBlockPayload outside = b.slices[2];
  outside.layer_begin = 3;
  outside.layer_end = 4;
  expect_refused(outside, "layers [3, 4) outside this cache's 3 layers");
  EXPECT_EQ(CachedTokens(bm, b.whole), 0);
  // Every layer in, but the transfer failed: it ends incomplete, and the
  // block (filed: its bytes are whole) is released.
  ASSERT_TRUE(receiver.Install(b.slices[0], 2.0).ok());
  ASSERT_TRUE(receiver.Install(b.slices[2], 2.0).ok());
  EXPECT_FALSE(receiver.End({.transfer_id = 1, .num_blocks = 1}));
  EXPECT_EQ(bm.num_used_blocks(), 0);

  // A transfer that ends with a block partial ends incomplete, and the
  // partial block is freed without ever being filed.
  const SlicedBlock c = MakeSlicedBlock(layout, 2, 700);
  ASSERT_TRUE(receiver.Install(c.slices[0], 3.0).ok());
  ASSERT_TRUE(receiver.Install(c.slices[2], 3.0).ok());
  EXPECT_EQ(bm.num_used_blocks(), 1);
  EXPECT_FALSE(receiver.End({.transfer_id = 2, .num_blocks = 0}));
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(CachedTokens(bm, c.whole), 0);
}

TEST(KvTransferTest, PartialBlocksOfAQuietTransferAreFreedAtTheTimeout) {
  KvCacheLayout layout = SmallLayout(DType::kI8);
  auto cache = KvCache::Allocate(layout, HostMemory());
  ASSERT_TRUE(cache.ok());
  BlockManager bm(8, 4, /*enable_prefix_caching=*/true);
  KvTransferReceiver receiver(bm, **cache, /*timeout_seconds=*/30);
  const SlicedBlock b = MakeSlicedBlock(layout, 1, 100);
  ASSERT_TRUE(receiver.Install(b.slices[0], 100.0).ok());
  EXPECT_EQ(receiver.num_partial_blocks(), 1);
  EXPECT_EQ(bm.num_used_blocks(), 1);
  EXPECT_TRUE(receiver.Expire(129.0).empty());
  EXPECT_EQ(receiver.Expire(131.0), std::vector<uint64_t>{1});
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(receiver.num_partial_blocks(), 0);
  EXPECT_EQ(CachedTokens(bm, b.whole), 0);
  // Its last slice, late, starts a new (partial) block, not a filed one.
  ASSERT_TRUE(receiver.Install(b.slices[1], 140.0).ok());
  EXPECT_EQ(CachedTokens(bm, b.whole), 0);
  EXPECT_FALSE(receiver.End({.transfer_id = 1, .num_blocks = 1}));
  EXPECT_EQ(bm.num_used_blocks(), 0);
}

// Two transfers of the same prefix: the one that completes second finds it
// filed, frees its private block and counts the block as landed.
TEST(KvTransferTest, ABlockCachedWhileItsSlicesLandCountsAsLanded) {
  KvCacheLayout layout = SmallLayout(DType::kF32);
  auto cache = KvCache::Allocate(layout, HostMemory());
  ASSERT_TRUE(cache.ok());
  BlockManager bm(8, 4, /*enable_prefix_caching=*/true);
  KvTransferReceiver receiver(bm, **cache, 30);
  const SlicedBlock a = MakeSlicedBlock(layout, 1, 100);
  SlicedBlock b = MakeSlicedBlock(layout, 2, 100);
  ASSERT_TRUE(receiver.Install(a.slices[0], 1.0).ok());
  ASSERT_TRUE(receiver.Install(b.whole, 1.0).ok());  // the other's whole block, filed
  EXPECT_EQ(bm.num_used_blocks(), 2);
  ASSERT_TRUE(receiver.Install(a.slices[1], 1.0).ok());
  EXPECT_EQ(bm.num_used_blocks(), 1);  // a's private block went back
  EXPECT_TRUE(receiver.End({.transfer_id = 1, .num_blocks = 1}));
  EXPECT_TRUE(receiver.End({.transfer_id = 2, .num_blocks = 1}));
  EXPECT_EQ(receiver.blocks_installed(), 1);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(CachedTokens(bm, a.whole), 4);
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
    std::vector<KvBlockPayload> sent;  // every block or slice, in order
  };
  // `receiving`: the decode end (the other end's TakeLanded is empty).
  // `per_layer`: what SendsPerLayer says.
  LoopbackConnector(std::shared_ptr<Wire> wire, bool receiving, bool per_layer = true)
      : wire_(std::move(wire)), receiving_(receiving), per_layer_(per_layer) {}

  bool SendsPerLayer() const override { return per_layer_; }
  void Send(KvBlockPayload block) override {
    // Through the byte layout, as a transport would carry it.
    auto copy = DeserializeBlock(SerializeBlock(block));
    std::lock_guard<std::mutex> lock(wire_->mu);
    wire_->in_flight.blocks.push_back(*copy);
    wire_->sent.push_back(std::move(copy).value());
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
  bool per_layer_;
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

// Each block's bytes as they went, by hash: a whole block's, or its layer
// slices' put together in layer order (each layer exactly once).
std::map<uint64_t, std::vector<uint8_t>> BlocksAsSent(const std::vector<KvBlockPayload>& sent, int32_t num_layers) {
  std::map<uint64_t, std::vector<const KvBlockPayload*>> parts;
  for (const KvBlockPayload& p : sent) parts[p.hash].push_back(&p);
  std::map<uint64_t, std::vector<uint8_t>> blocks;
  for (auto& entry : parts) {
    std::vector<const KvBlockPayload*>& ps = entry.second;
    std::sort(ps.begin(), ps.end(), [](const KvBlockPayload* a, const KvBlockPayload* b) {
      return a->layer_begin < b->layer_begin;
    });
    std::vector<uint8_t>& bytes = blocks[entry.first];
    int32_t next = 0;
    for (const KvBlockPayload* p : ps) {
      EXPECT_EQ(p->layer_begin, next) << "block " << p->block_index;
      next = p->layer_end;
      bytes.insert(bytes.end(), p->data.begin(), p->data.end());
    }
    EXPECT_EQ(next, num_layers) << "a block with layers missing";
  }
  return blocks;
}

// Prefill on one engine, decode on another: the same greedy tokens as one
// engine, for f32 and int8 caches, prompts prefilled in several chunks,
// blocks sent whole after each pass (a connector that cannot send per
// layer) or per layer during it; and the blocks per layer are, byte for
// byte, the whole blocks: the decode engines' caches end byte for byte
// equal (the same blocks land in the same order, then decode the same).
TEST(KvTransferTest, DecodingAfterATransferEqualsOneEngine) {
  const std::vector<int32_t> text = engine_test::HeldoutIds("tiny-llama");
  for (DType dtype : {DType::kF32, DType::kI8}) {
    EngineOptions o = engine_test::TinyOptions("tiny-llama");
    o.kv_cache_dtype = dtype;
    o.max_prefill_chunk = 24;  // several passes per prompt, blocks sent after each
    LoadedModel model = engine_test::LoadOrDie(o);
    auto single = engine_test::EngineOrDie(model, o);
    ASSERT_TRUE(single);
    std::map<uint64_t, std::vector<uint8_t>> whole_blocks;
    std::unique_ptr<LLMEngine> whole_decode;
    for (bool per_layer : {false, true}) {
      auto prefill = engine_test::EngineOrDie(model, o);
      auto decode = engine_test::EngineOrDie(model, o);
      ASSERT_TRUE(prefill && decode);
      auto wire = std::make_shared<LoopbackConnector::Wire>();
      ASSERT_TRUE(
          prefill->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, false, per_layer), 30).ok());
      ASSERT_TRUE(decode->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, true, per_layer), 30).ok());
      EXPECT_EQ(prefill->sends_kv_per_layer(), per_layer);
      const auto num_layers = static_cast<int32_t>(model.weights->config().num_layers);

      uint64_t transfer = 100;
      for (size_t length : {size_t{37}, size_t{64}, size_t{90}}) {
        SCOPED_TRACE(fmt::format("{} tokens, {} cache, {}", length, DTypeName(dtype),
                                 per_layer ? "per layer" : "whole blocks"));
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
      const EngineCounters sent = prefill->Counters(), received = decode->Counters();
      EXPECT_GT(sent.kv_blocks_sent, 0);
      EXPECT_EQ(received.kv_blocks_received, sent.kv_blocks_sent);
      EXPECT_EQ(sent.kv_layer_slices_sent, per_layer ? sent.kv_blocks_sent * num_layers : 0);
      EXPECT_EQ(received.kv_layer_slices_received, received.kv_blocks_received * num_layers);
      EXPECT_EQ(received.kv_blocks_used, 0);

      std::lock_guard<std::mutex> lock(wire->mu);
      for (const KvBlockPayload& p : wire->sent) {
        EXPECT_EQ(p.layer_end - p.layer_begin, per_layer ? 1 : num_layers);
      }
      if (!per_layer) {
        whole_blocks = BlocksAsSent(wire->sent, num_layers);
        whole_decode = std::move(decode);
        continue;
      }
      EXPECT_EQ(BlocksAsSent(wire->sent, num_layers), whole_blocks);
      const KvCache& a = whole_decode->kv_cache();
      const KvCache& b = decode->kv_cache();
      const KvCacheLayout& l = a.layout();
      const auto pool = static_cast<size_t>(l.num_blocks * l.block_size * l.TokenElementBytes());
      const auto scales = static_cast<size_t>(l.num_blocks * l.block_size * l.TokenScaleBytes());
      for (int64_t layer = 0; layer < l.num_layers; ++layer) {
        EXPECT_EQ(std::memcmp(a.keys(layer), b.keys(layer), pool), 0) << "layer " << layer;
        EXPECT_EQ(std::memcmp(a.values(layer), b.values(layer), pool), 0) << "layer " << layer;
        if (scales > 0) {
          EXPECT_EQ(std::memcmp(a.key_scales(layer), b.key_scales(layer), scales), 0) << "layer " << layer;
          EXPECT_EQ(std::memcmp(a.value_scales(layer), b.value_scales(layer), scales), 0) << "layer " << layer;
        }
      }
    }
  }
}

// Within a pass, every planned block's slice of layer l goes before any of
// layer l + 1, each layer once: the slices follow the pass's layers.
TEST(KvTransferTest, LayerSlicesGoOutInLayerOrderOncePerPass) {
  EngineOptions o = engine_test::TinyOptions("tiny-llama");
  o.max_prefill_chunk = 40;
  LoadedModel model = engine_test::LoadOrDie(o);
  auto prefill = engine_test::EngineOrDie(model, o);
  ASSERT_TRUE(prefill);
  auto wire = std::make_shared<LoopbackConnector::Wire>();
  ASSERT_TRUE(prefill->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, false), 30).ok());
  const auto num_layers = static_cast<int32_t>(model.weights->config().num_layers);
  const std::vector<int32_t> text = engine_test::HeldoutIds("tiny-llama");
  Greedy(*prefill, std::vector<int32_t>(text.begin(), text.begin() + 100), 1, 7);
  // 100 tokens in passes of 40, 40 and 20 complete blocks 0-1, 2-4 and 5.
  const std::vector<std::vector<int32_t>> blocks_by_pass = {{0, 1}, {2, 3, 4}, {5}};
  std::lock_guard<std::mutex> lock(wire->mu);
  size_t at = 0;
  for (const std::vector<int32_t>& blocks : blocks_by_pass) {
    for (int32_t layer = 0; layer < num_layers; ++layer) {
      for (int32_t block : blocks) {
        ASSERT_LT(at, wire->sent.size());
        EXPECT_EQ(wire->sent[at].block_index, block) << at;
        EXPECT_EQ(wire->sent[at].layer_begin, layer) << at;
        ++at;
      }
    }
  }
  EXPECT_EQ(at, wire->sent.size());
}

// A pass whose runtime called back for only some layers (kv_write fused
// away, a backend without step boundaries) or out of order: what is left
// goes after the pass, each layer once, with the cache's bytes.
TEST(KvTransferTest, LayersTheRuntimeDidNotReportGoAfterThePass) {
  auto cache = KvCache::Allocate(SmallLayout(DType::kF32), HostMemory());
  ASSERT_TRUE(cache.ok());
  KvBlockPayload whole = SampleBlock(4, static_cast<size_t>(KvBlockPayloadBytes((*cache)->layout())));
  ASSERT_TRUE(WriteKvBlock(**cache, 3, whole.data).ok());
  for (const std::vector<int32_t>& called : {std::vector<int32_t>{}, {0}, {1}, {0, 1}}) {
    auto wire = std::make_shared<LoopbackConnector::Wire>();
    LoopbackConnector connector(wire, false);
    KvLayerSender sender(connector, **cache);
    sender.Plan({.transfer_id = 9, .block_index = 0, .parent_hash = whole.parent_hash, .hash = whole.hash,
                 .tokens = whole.tokens, .cache_block = 3});
    const KvLayerCallback callback = sender.Callback();
    ASSERT_TRUE(callback);
    for (int32_t layer : called) callback.fn(callback.context, layer);
    sender.SendLayersLeft();
    EXPECT_EQ(sender.layers_sent(), 2) << fmt::format("{}", called);
    EXPECT_EQ(sender.slices_sent(), 2) << fmt::format("{}", called);
    std::lock_guard<std::mutex> lock(wire->mu);
    EXPECT_EQ(BlocksAsSent(wire->sent, 2).at(whole.hash), whole.data) << fmt::format("{}", called);
  }
}

TEST(KvTransferTest, PerLayerSendingCanBeTurnedOff) {
  EngineOptions o = engine_test::TinyOptions("tiny-llama");
  LoadedModel model = engine_test::LoadOrDie(o);
  auto prefill = engine_test::EngineOrDie(model, o);
  ASSERT_TRUE(prefill);
  auto wire = std::make_shared<LoopbackConnector::Wire>();
  ASSERT_TRUE(prefill->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, false), 30,
                                         /*send_per_layer=*/false)
                  .ok());
  EXPECT_FALSE(prefill->sends_kv_per_layer());
  const std::vector<int32_t> text = engine_test::HeldoutIds("tiny-llama");
  Greedy(*prefill, std::vector<int32_t>(text.begin(), text.begin() + 40), 1, 7);
  std::lock_guard<std::mutex> lock(wire->mu);
  ASSERT_EQ(wire->sent.size(), 2u);
  EXPECT_EQ(wire->sent[0].layer_end - wire->sent[0].layer_begin, model.weights->config().num_layers);
}

// A pass that fails after its layer slices went (here its tensor dump,
// written after the pass, finds its folder gone): its blocks do not count
// as sent, the request's transfer ends without them, and the decode side
// refuses the transfer and holds nothing of it.
TEST(KvTransferTest, APassThatFailsAfterItsSlicesWentFailsItsTransfer) {
  EngineOptions o = engine_test::TinyOptions("tiny-llama");
  LoadedModel model = engine_test::LoadOrDie(o);
  EngineOptions dumping = o;
  dumping.dump_dir =
      (std::filesystem::temp_directory_path() / fmt::format("kiln-kv-failed-pass-{}", getpid())).string();
  auto prefill = engine_test::EngineOrDie(model, dumping);
  auto decode = engine_test::EngineOrDie(model, o);
  ASSERT_TRUE(prefill && decode);
  std::filesystem::remove_all(dumping.dump_dir);
  auto wire = std::make_shared<LoopbackConnector::Wire>();
  ASSERT_TRUE(prefill->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, false), 30).ok());
  ASSERT_TRUE(decode->AttachKvConnector(std::make_unique<LoopbackConnector>(wire, true), 30).ok());
  const auto num_layers = static_cast<int32_t>(model.weights->config().num_layers);

  const std::vector<int32_t> text = engine_test::HeldoutIds("tiny-llama");
  GenerationRequest r;
  r.prompt_ids.assign(text.begin(), text.begin() + 40);
  r.params.max_tokens = 1;
  r.kv_transfer_id = 9;
  std::vector<GenerationRequest> rs;
  rs.push_back(std::move(r));
  EXPECT_FALSE(prefill->Generate(std::move(rs)).ok());
  EXPECT_EQ(prefill->Counters().kv_layer_slices_sent, 2 * num_layers);  // both full blocks, every layer
  EXPECT_EQ(prefill->Counters().kv_blocks_sent, 0);

  ASSERT_TRUE(decode->Step().ok());
  {
    std::lock_guard<std::mutex> lock(wire->mu);
    EXPECT_EQ(wire->acks, (std::vector<std::pair<uint64_t, bool>>{{9, false}}));
  }
  EXPECT_EQ(decode->Counters().kv_transfers_completed, 0);
  EXPECT_EQ(decode->Counters().kv_blocks_used, 0);
  EXPECT_FALSE(decode->HasOpenKvTransfers());
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
