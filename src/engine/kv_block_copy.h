// A KV block's bytes out of the cache and back in: per layer the block's
// keys, its values, and for an int8 cache their scales (the layout of
// KvBlockPayload::data). A range of layers is the same bytes for those
// layers only, so a whole block is its layers' slices one after another.
// Host-memory caches only (the CPU backend's).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/kv_cache.h"
#include "core/status.h"

namespace kiln {

// Bytes of one block's payload: layout.BlockBytes().
int64_t KvBlockPayloadBytes(const KvCacheLayout& layout);
// Bytes of one layer of one block's payload.
int64_t KvLayerSliceBytes(const KvCacheLayout& layout);

// REQUIRES: 0 <= block < num_blocks.
std::vector<uint8_t> ReadKvBlock(const KvCache& cache, int32_t block);
// Layers [layer_begin, layer_end) of a block.
// REQUIRES: 0 <= block < num_blocks, 0 <= layer_begin < layer_end <= num_layers.
std::vector<uint8_t> ReadKvBlockLayers(const KvCache& cache, int32_t block, int32_t layer_begin, int32_t layer_end);

// Errors when `bytes` is not one block's payload of this cache's layout.
Status WriteKvBlock(KvCache& cache, int32_t block, std::span<const uint8_t> bytes);
// Writes layers [layer_begin, layer_begin + n) of a block from the payload
// of n layers; errors when the range is outside the cache's layers or
// `bytes` is not a whole number of its layer slices.
Status WriteKvBlockLayers(KvCache& cache, int32_t block, int32_t layer_begin, std::span<const uint8_t> bytes);

}  // namespace kiln
