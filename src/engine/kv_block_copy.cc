// Copies between a block's slots in every pool and one flat buffer.
#include "engine/kv_block_copy.h"

#include <cassert>
#include <cstring>

namespace kiln {
namespace {

// Calls `part(pool_bytes_of_this_block, bytes)` for each of the block's
// parts of layers [layer_begin, layer_end) in payload order.
template <typename Part>
void ForEachPart(const KvCache& cache, int32_t block, int64_t layer_begin, int64_t layer_end, Part part) {
  const KvCacheLayout& l = cache.layout();
  const auto elements = static_cast<size_t>(l.block_size * l.TokenElementBytes());
  const auto scales = static_cast<size_t>(l.block_size * l.TokenScaleBytes());
  const auto b = static_cast<size_t>(block);
  for (int64_t layer = layer_begin; layer < layer_end; ++layer) {
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

int64_t KvLayerSliceBytes(const KvCacheLayout& layout) {
  return 2 * layout.block_size * layout.TokenBytes();
}

std::vector<uint8_t> ReadKvBlock(const KvCache& cache, int32_t block) {
  return ReadKvBlockLayers(cache, block, 0, static_cast<int32_t>(cache.layout().num_layers));
}

std::vector<uint8_t> ReadKvBlockLayers(const KvCache& cache, int32_t block, int32_t layer_begin, int32_t layer_end) {
  assert(0 <= layer_begin && layer_begin < layer_end && layer_end <= cache.layout().num_layers);
  std::vector<uint8_t> out(static_cast<size_t>(KvLayerSliceBytes(cache.layout()) * (layer_end - layer_begin)));
  size_t at = 0;
  ForEachPart(cache, block, layer_begin, layer_end, [&](const uint8_t* pool, size_t size) {
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
  return WriteKvBlockLayers(cache, block, 0, bytes);
}

Status WriteKvBlockLayers(KvCache& cache, int32_t block, int32_t layer_begin, std::span<const uint8_t> bytes) {
  const KvCacheLayout& l = cache.layout();
  const auto slice = static_cast<size_t>(KvLayerSliceBytes(l));
  if (bytes.empty() || bytes.size() % slice != 0) {
    return InvalidArgument("KV block layers of {} bytes, where this cache's layer slices have {}", bytes.size(),
                           slice);
  }
  const int64_t layer_end = layer_begin + static_cast<int64_t>(bytes.size() / slice);
  if (layer_begin < 0 || layer_end > l.num_layers) {
    return OutOfRange("KV block layers [{}, {}) outside the cache's {} layers", layer_begin, layer_end, l.num_layers);
  }
  if (block < 0 || block >= l.num_blocks) {
    return OutOfRange("KV block {} outside the cache of {}", block, l.num_blocks);
  }
  size_t at = 0;
  ForEachPart(cache, block, layer_begin, layer_end, [&](uint8_t* pool, size_t size) {
    std::memcpy(pool, bytes.data() + at, size);
    at += size;
  });
  return Status::Ok();
}

}  // namespace kiln
