// A KV block's bytes out of the cache and back in: per layer the block's
// keys, its values, and for an int8 cache their scales (the layout of
// KvBlockPayload::data). Host-memory caches only (the CPU backend's).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/kv_cache.h"
#include "core/status.h"

namespace kiln {

// Bytes of one block's payload: layout.BlockBytes().
int64_t KvBlockPayloadBytes(const KvCacheLayout& layout);

// REQUIRES: 0 <= block < num_blocks.
std::vector<uint8_t> ReadKvBlock(const KvCache& cache, int32_t block);

// Errors when `bytes` is not one block's payload of this cache's layout.
Status WriteKvBlock(KvCache& cache, int32_t block, std::span<const uint8_t> bytes);

}  // namespace kiln
