// What moves between a prefill instance and a decode instance: the
// handshake that checks both run the same model with the same KV cache
// shape, and KV blocks with the token prefix that names them. Both are
// plain bytes here, so that any transport (the UCX connector, a test's
// loopback) carries them unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

// What must agree for one instance's KV blocks to mean the same to another.
struct KvPeerIdentity {
  std::string model_hash;  // ModelIdentityHash
  int32_t block_size = 0;
  DType kv_dtype = DType::kF32;
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

std::vector<uint8_t> SerializeIdentity(const KvPeerIdentity& identity);
Expected<KvPeerIdentity> DeserializeIdentity(std::span<const uint8_t> bytes);

// Ok when `here` and `there` agree; else an InvalidArgument naming every
// field that differs with both values ("block size 16 here, 32 on the peer").
Status CheckSameIdentity(const KvPeerIdentity& here, const KvPeerIdentity& there);

// A KV block of a request's prompt, whole or a range of its layers: which
// transfer it belongs to, its place in the prompt, the hash chain the
// prefix cache files it under, its tokens, and the bytes of layers
// [layer_begin, layer_end) (KvBlockBytes: per layer the keys, the values,
// then for an int8 cache the key and value scales). A whole block is
// [0, num_layers); a sender that sends per layer sends each block as
// slices of one layer, each as soon as that layer's keys and values are
// computed, and the receiver files the block once every layer landed.
struct KvBlockPayload {
  uint64_t transfer_id = 0;
  int32_t block_index = 0;
  uint64_t parent_hash = 0;  // the previous block's hash (a fixed root for the first)
  uint64_t hash = 0;
  int32_t layer_begin = 0;
  int32_t layer_end = 0;  // exclusive; a message's range is never empty
  std::vector<int32_t> tokens;
  std::vector<uint8_t> data;
};

std::vector<uint8_t> SerializeBlock(const KvBlockPayload& block);
// Errors (Corrupt) on a truncated or inconsistent message (an empty or
// negative layer range among them; whether the range is within the
// receiver's layers is the receiver's to check).
Expected<KvBlockPayload> DeserializeBlock(std::span<const uint8_t> bytes);

// The end of a request's transfer: how many blocks were sent in all.
struct KvTransferEnd {
  uint64_t transfer_id = 0;
  int32_t num_blocks = 0;
};

std::vector<uint8_t> SerializeTransferEnd(const KvTransferEnd& end);
Expected<KvTransferEnd> DeserializeTransferEnd(std::span<const uint8_t> bytes);

}  // namespace kiln
