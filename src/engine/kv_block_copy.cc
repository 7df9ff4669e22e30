// Copies between a block's slots in every pool and one flat buffer.
#include "engine/kv_block_copy.h"

#include <cstring>

namespace kiln {
namespace {

// Calls `part(pool_bytes_of_this_block, bytes)` for each of the block's
// parts in payload order.
template <typename Part>
void ForEachPart(const KvCache& cache, int32_t block, Part part) {
  const KvCacheLayout& l = cache.layout();
  const auto elements = static_cast<size_t>(l.block_size * l.TokenElementBytes());
  const auto scales = static_cast<size_t>(l.block_size * l.TokenScaleBytes());
  const auto b = static_cast<size_t>(block);
  for (int64_t layer = 0; layer < l.num_layers; ++layer) {
    part(static_cast<uint8_t*>(cache.keys(layer)) + b * elements, elements);
    part(static_cast<uint8_t*>(cache.values(layer)) + b * elements, elements);
    if (scales > 0) {
      part(reinterpret_cast<uint8_t*>(cache.key_scales(layer)) + b * scales, scales);
      part(reinterpret_cast<uint8_t*>(cache.value_scales(layer)) + b * scales, scales);
    }
  }
}

}  // namespace

int64_t KvBlockPayloadBytes(const KvCacheLayout& layout) { return layout.BlockBytes(); }

std::vector<uint8_t> ReadKvBlock(const KvCache& cache, int32_t block) {
  std::vector<uint8_t> out(static_cast<size_t>(KvBlockPayloadBytes(cache.layout())));
  size_t at = 0;
  ForEachPart(cache, block, [&](const uint8_t* pool, size_t size) {
    std::memcpy(out.data() + at, pool, size);
    at += size;
  });
  return out;
}

Status WriteKvBlock(KvCache& cache, int32_t block, std::span<const uint8_t> bytes) {
  const auto expected = static_cast<size_t>(KvBlockPayloadBytes(cache.layout()));
  if (bytes.size() != expected) {
    return InvalidArgument("KV block of {} bytes, where this cache's blocks have {}", bytes.size(), expected);
  }
  if (block < 0 || block >= cache.layout().num_blocks) {
    return OutOfRange("KV block {} outside the cache of {}", block, cache.layout().num_blocks);
  }
  size_t at = 0;
  ForEachPart(cache, block, [&](uint8_t* pool, size_t size) {
    std::memcpy(pool, bytes.data() + at, size);
    at += size;
  });
  return Status::Ok();
}

}  // namespace kiln
