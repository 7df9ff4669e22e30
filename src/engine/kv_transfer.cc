// Byte layouts of the handshake, KV blocks and transfer ends: fixed-width
// little-endian fields behind a magic and a version, so that a peer built
// from another kiln is refused rather than misread.
#include "engine/kv_transfer.h"

#include <fmt/ranges.h>

#include <cstring>

#include "core/byte_stream.h"

namespace kiln {
namespace {

constexpr uint32_t kIdentityMagic = 0x4b564948;  // "KVIH"
constexpr uint32_t kBlockMagic = 0x4b56424b;     // "KVBK"
constexpr uint32_t kEndMagic = 0x4b56454e;       // "KVEN"
// 2: a block carries its layer range.
constexpr uint32_t kVersion = 2;

// The magic and format version every message starts with.
Status ReadHeader(ByteReader& r, uint32_t magic) {
  KILN_ASSIGN_OR_RETURN(uint32_t m, r.Get<uint32_t>());
  KILN_ASSIGN_OR_RETURN(uint32_t v, r.Get<uint32_t>());
  if (m != magic) return Status(StatusCode::kCorrupt, fmt::format("{}: not a {} message", r.what(), r.what()));
  if (v != kVersion) {
    return Status(StatusCode::kCorrupt,
                  fmt::format("{}: format version {} here, {} on the peer", r.what(), kVersion, v));
  }
  return Status::Ok();
}

// Lengths of variable parts are bounded so that a corrupt length is refused
// before anything is allocated for it.
constexpr uint32_t kMaxHashLength = 1024;
constexpr uint32_t kMaxBlockTokens = 1 << 16;

}  // namespace

std::vector<uint8_t> SerializeIdentity(const KvPeerIdentity& identity) {
  ByteWriter w;
  w.Put(kIdentityMagic);
  w.Put(kVersion);
  w.Put(static_cast<uint32_t>(identity.model_hash.size()));
  w.PutBytes(identity.model_hash.data(), identity.model_hash.size());
  w.Put(identity.block_size);
  w.Put(static_cast<int32_t>(identity.kv_dtype));
  w.Put(identity.num_layers);
  w.Put(identity.num_kv_heads);
  w.Put(identity.head_dim);
  return w.Take();
}

Expected<KvPeerIdentity> DeserializeIdentity(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "KV handshake");
  KILN_RETURN_IF_ERROR(ReadHeader(r, kIdentityMagic));
  KvPeerIdentity id;
  KILN_ASSIGN_OR_RETURN(uint32_t hash_length, r.Get<uint32_t>());
  if (hash_length > kMaxHashLength) return Status(StatusCode::kCorrupt, "KV handshake: model hash too long");
  id.model_hash.resize(hash_length);
  KILN_RETURN_IF_ERROR(r.GetBytes(id.model_hash.data(), hash_length));
  KILN_ASSIGN_OR_RETURN(id.block_size, r.Get<int32_t>());
  KILN_ASSIGN_OR_RETURN(int32_t dtype, r.Get<int32_t>());
  if (dtype < 0 || dtype >= kNumDTypes) {
    return Status(StatusCode::kCorrupt, fmt::format("KV handshake: no dtype {}", dtype));
  }
  id.kv_dtype = static_cast<DType>(dtype);
  KILN_ASSIGN_OR_RETURN(id.num_layers, r.Get<int64_t>());
  KILN_ASSIGN_OR_RETURN(id.num_kv_heads, r.Get<int64_t>());
  KILN_ASSIGN_OR_RETURN(id.head_dim, r.Get<int64_t>());
  KILN_RETURN_IF_ERROR(r.End());
  return id;
}

Status CheckSameIdentity(const KvPeerIdentity& here, const KvPeerIdentity& there) {
  std::vector<std::string> differ;
  if (here.model_hash != there.model_hash) {
    differ.push_back(fmt::format("model hash {} here, {} on the peer", here.model_hash, there.model_hash));
  }
  if (here.block_size != there.block_size) {
    differ.push_back(fmt::format("block size {} here, {} on the peer", here.block_size, there.block_size));
  }
  if (here.kv_dtype != there.kv_dtype) {
    differ.push_back(fmt::format("KV cache dtype {} here, {} on the peer", DTypeName(here.kv_dtype),
                                 DTypeName(there.kv_dtype)));
  }
  if (here.num_layers != there.num_layers || here.num_kv_heads != there.num_kv_heads ||
      here.head_dim != there.head_dim) {
    differ.push_back(fmt::format("KV shape {} layers x {} heads x {} here, {} x {} x {} on the peer",
                                 here.num_layers, here.num_kv_heads, here.head_dim, there.num_layers,
                                 there.num_kv_heads, there.head_dim));
  }
  if (differ.empty()) return Status::Ok();
  return InvalidArgument("KV peer runs another configuration: {}", fmt::join(differ, "; "));
}

std::vector<uint8_t> SerializeBlock(const KvBlockPayload& block) {
  ByteWriter w;
  w.Put(kBlockMagic);
  w.Put(kVersion);
  w.Put(block.transfer_id);
  w.Put(block.block_index);
  w.Put(block.parent_hash);
  w.Put(block.hash);
  w.Put(block.layer_begin);
  w.Put(block.layer_end);
  w.Put(static_cast<uint32_t>(block.tokens.size()));
  w.PutBytes(block.tokens.data(), block.tokens.size() * sizeof(int32_t));
  w.Put(static_cast<uint64_t>(block.data.size()));
  w.PutBytes(block.data.data(), block.data.size());
  return w.Take();
}

Expected<KvBlockPayload> DeserializeBlock(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "KV block");
  KILN_RETURN_IF_ERROR(ReadHeader(r, kBlockMagic));
  KvBlockPayload b;
  KILN_ASSIGN_OR_RETURN(b.transfer_id, r.Get<uint64_t>());
  KILN_ASSIGN_OR_RETURN(b.block_index, r.Get<int32_t>());
  KILN_ASSIGN_OR_RETURN(b.parent_hash, r.Get<uint64_t>());
  KILN_ASSIGN_OR_RETURN(b.hash, r.Get<uint64_t>());
  KILN_ASSIGN_OR_RETURN(b.layer_begin, r.Get<int32_t>());
  KILN_ASSIGN_OR_RETURN(b.layer_end, r.Get<int32_t>());
  if (b.layer_begin < 0 || b.layer_end <= b.layer_begin) {
    return Status(StatusCode::kCorrupt, fmt::format("KV block: layers [{}, {})", b.layer_begin, b.layer_end));
  }
  KILN_ASSIGN_OR_RETURN(uint32_t num_tokens, r.Get<uint32_t>());
  if (num_tokens == 0 || num_tokens > kMaxBlockTokens) {
    return Status(StatusCode::kCorrupt, fmt::format("KV block: {} tokens", num_tokens));
  }
  b.tokens.resize(num_tokens);
  KILN_RETURN_IF_ERROR(r.GetBytes(b.tokens.data(), num_tokens * sizeof(int32_t)));
  KILN_ASSIGN_OR_RETURN(uint64_t num_bytes, r.Get<uint64_t>());
  if (num_bytes > bytes.size()) return Status(StatusCode::kCorrupt, "KV block: data longer than the message");
  b.data.resize(num_bytes);
  KILN_RETURN_IF_ERROR(r.GetBytes(b.data.data(), num_bytes));
  KILN_RETURN_IF_ERROR(r.End());
  if (b.block_index < 0) return Status(StatusCode::kCorrupt, "KV block: negative block index");
  return b;
}

std::vector<uint8_t> SerializeTransferEnd(const KvTransferEnd& end) {
  ByteWriter w;
  w.Put(kEndMagic);
  w.Put(kVersion);
  w.Put(end.transfer_id);
  w.Put(end.num_blocks);
  return w.Take();
}

Expected<KvTransferEnd> DeserializeTransferEnd(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "KV transfer end");
  KILN_RETURN_IF_ERROR(ReadHeader(r, kEndMagic));
  KvTransferEnd end;
  KILN_ASSIGN_OR_RETURN(end.transfer_id, r.Get<uint64_t>());
  KILN_ASSIGN_OR_RETURN(end.num_blocks, r.Get<int32_t>());
  KILN_RETURN_IF_ERROR(r.End());
  return end;
}

}  // namespace kiln
