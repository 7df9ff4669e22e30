// The UCX KV connector between two ends in one process, on loopback: the
// handshake (and its refusal), blocks and transfer ends carried intact and
// in order, acknowledgements back, and a peer that goes away.
#include "disagg/ucx_kv_connector.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <numeric>
#include <thread>

namespace kiln::disagg {
namespace ucx_kv_connector_tests {

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t length = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  close(fd);
  return ntohs(addr.sin_port);
}

KvPeerIdentity Identity(int32_t block_size = 16) {
  return KvPeerIdentity{.model_hash = "00112233aabbccdd", .block_size = block_size, .kv_dtype = DType::kF32,
                        .num_layers = 2, .num_kv_heads = 2, .head_dim = 8};
}

KvBlockPayload Block(uint64_t transfer, int32_t index) {
  KvBlockPayload b;
  b.transfer_id = transfer;
  b.block_index = index;
  b.tokens.resize(16);
  std::iota(b.tokens.begin(), b.tokens.end(), 16 * index);
  b.hash = 1000 + static_cast<uint64_t>(index);
  b.layer_begin = 0;
  b.layer_end = 2;  // Identity's layers
  b.data.assign(4096, static_cast<uint8_t>(index + 1));
  return b;
}

// Layer `layer` of Block(transfer, index).
KvBlockPayload Slice(uint64_t transfer, int32_t index, int32_t layer) {
  KvBlockPayload b = Block(transfer, index);
  b.layer_begin = layer;
  b.layer_end = layer + 1;
  b.data.assign(2048, static_cast<uint8_t>(16 * layer + index));
  return b;
}

// Waits until the decode end has taken `blocks` blocks and `ends` ends.
KvLanded TakeUntil(KvConnector& decode, size_t blocks, size_t ends) {
  KvLanded all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((all.blocks.size() < blocks || all.ends.size() < ends) && std::chrono::steady_clock::now() < deadline) {
    KvLanded some = decode.TakeLanded();
    for (auto& b : some.blocks) all.blocks.push_back(std::move(b));
    for (auto& e : some.ends) all.ends.push_back(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return all;
}

TEST(UcxKvConnectorTest, CarriesBlocksAndAcknowledgements) {
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  auto decode = CreateUcxKvConnector({.listen = address, .identity = Identity()});
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  auto prefill = CreateUcxKvConnector({.peer = address, .identity = Identity()});
  ASSERT_TRUE(prefill.ok()) << prefill.status().ToString();

  // Whole blocks, then a block as layer slices: UCX sends per layer.
  EXPECT_TRUE((*prefill)->SendsPerLayer());
  for (int32_t i = 0; i < 5; ++i) (*prefill)->Send(Block(7, i));
  for (int32_t layer = 0; layer < 2; ++layer) (*prefill)->Send(Slice(7, 5, layer));
  (*prefill)->EndTransfer({.transfer_id = 7, .num_blocks = 6});
  KvLanded landed = TakeUntil(**decode, 7, 1);
  ASSERT_EQ(landed.blocks.size(), 7u);
  for (int32_t i = 0; i < 7; ++i) {
    const KvBlockPayload expected = i < 5 ? Block(7, i) : Slice(7, 5, i - 5);
    const KvBlockPayload& got = landed.blocks[static_cast<size_t>(i)];
    EXPECT_EQ(got.block_index, expected.block_index);
    EXPECT_EQ(got.layer_begin, expected.layer_begin);
    EXPECT_EQ(got.layer_end, expected.layer_end);
    EXPECT_EQ(got.tokens, expected.tokens);
    EXPECT_EQ(got.data, expected.data);
  }
  ASSERT_EQ(landed.ends.size(), 1u);
  EXPECT_EQ(landed.ends[0].num_blocks, 6);

  (*decode)->Acknowledge(7, true);
  EXPECT_TRUE((*prefill)->WaitAcknowledged(7, 20).ok());
  (*decode)->Acknowledge(7, true);  // once only: the second is ignored
  (*prefill)->EndTransfer({.transfer_id = 8, .num_blocks = 0});
  TakeUntil(**decode, 0, 1);
  (*decode)->Acknowledge(8, false);
  Status refused = (*prefill)->WaitAcknowledged(8, 20);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("could not take"), std::string::npos) << refused.message();

  // The decode end goes away: waiting fails at once, not at the time-out.
  decode->reset();
  (*prefill)->EndTransfer({.transfer_id = 9, .num_blocks = 0});
  const auto before = std::chrono::steady_clock::now();
  Status lost = (*prefill)->WaitAcknowledged(9, 20);
  EXPECT_FALSE(lost.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(15));
}

TEST(UcxKvConnectorTest, RefusesAPeerThatDiffers) {
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  auto decode = CreateUcxKvConnector({.listen = address, .identity = Identity(16)});
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  auto prefill = CreateUcxKvConnector({.peer = address, .identity = Identity(32)});
  ASSERT_FALSE(prefill.ok());
  EXPECT_NE(prefill.status().message().find("block size 32 here, 16 on the peer"), std::string::npos)
      << prefill.status().message();
}

TEST(UcxKvConnectorTest, NamesABadAddressOrAnAbsentPeer) {
  auto bad = CreateUcxKvConnector({.peer = "no-port-here", .identity = Identity()});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("host:port"), std::string::npos);
  auto both = CreateUcxKvConnector({.listen = "127.0.0.1:1", .peer = "127.0.0.1:2", .identity = Identity()});
  ASSERT_FALSE(both.ok());
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  auto absent = CreateUcxKvConnector({.peer = address, .identity = Identity(), .connect_timeout_seconds = 2});
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find(address), std::string::npos) << absent.status().message();
}

}  // namespace ucx_kv_connector_tests
}  // namespace kiln::disagg
