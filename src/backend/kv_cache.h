// The paged KV cache: per layer, one pool of fixed-size blocks for keys and
// one for values, allocated once at start-up in the memory domain of the
// backend that runs attention. Sequences own blocks through block tables;
// which blocks belong to whom is the engine's BlockManager's business.
// An int8 cache keeps a float scale per (token, KV head) in a scale pool
// beside each of its key and value pools.
// With a window pool, the sliding-window layers' pools hold
// window_num_blocks blocks in a block-id space of their own (the engine
// frees the blocks that fall out of their window), the other layers'
// num_blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/memory_domain.h"
#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

struct KvCacheLayout {
  int64_t num_layers = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 16;  // tokens per block
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  DType dtype = DType::kF32;  // f32, f16, bf16 or i8 (int8 with scales)
  // The window pool: its blocks (0: none, every layer in the full pool)
  // and, per layer, whether the layer's pools are in it.
  int64_t window_num_blocks = 0;
  std::vector<uint8_t> window_layers;

  bool HasWindowPool() const { return window_num_blocks > 0; }
  bool InWindowPool(int64_t layer) const {
    return HasWindowPool() && layer >= 0 && layer < static_cast<int64_t>(window_layers.size()) &&
           window_layers[static_cast<size_t>(layer)] != 0;
  }
  // Blocks in layer `layer`'s pools.
  int64_t LayerBlocks(int64_t layer) const { return InWindowPool(layer) ? window_num_blocks : num_blocks; }
  int64_t NumWindowLayers() const;

  // Bytes of keys (or of values) of one token in one layer, its scales
  // included: what sizing from --kv-cache-memory divides by.
  int64_t TokenBytes() const;
  // The parts of TokenBytes(): the elements, and the scales (0 but for i8).
  int64_t TokenElementBytes() const;
  int64_t TokenScaleBytes() const;
  // Bytes of one block across all layers, keys and values.
  int64_t BlockBytes() const;
  // The same across the full pool's layers, and across the window pool's
  // (which layers those are does not depend on window_num_blocks).
  int64_t FullBlockBytes() const;
  int64_t WindowBlockBytes() const;
};

// One layer's pools, as a kernel's runtime arguments carry them.
struct KvPoolPointers {
  void* keys = nullptr;
  void* values = nullptr;
  float* key_scales = nullptr;
  float* value_scales = nullptr;
};

class KvCache {
 public:
  // REQUIRES: layout fields positive.
  static Expected<std::unique_ptr<KvCache>> Allocate(const KvCacheLayout& layout, MemoryDomain& domain);

  const KvCacheLayout& layout() const { return layout_; }
  // Pools laid out [num_blocks][block_size][num_kv_heads][head_dim].
  void* keys(int64_t layer) const { return keys_[static_cast<size_t>(layer)].data(); }
  void* values(int64_t layer) const { return values_[static_cast<size_t>(layer)].data(); }
  // For an i8 cache, the scales [num_blocks][block_size][num_kv_heads] of
  // the keys and values (value = scale * int8); null for the other dtypes.
  float* key_scales(int64_t layer) const;
  float* value_scales(int64_t layer) const;
  int64_t TotalBytes() const;
  // Every layer's pools, [num_layers].
  const std::vector<KvPoolPointers>& pool_pointers() const { return pool_pointers_; }

  // Advises the pools for 4 KiB pages (MADV_NOHUGEPAGE) before anything is
  // written: each layer's key and value pool is its own allocation, and
  // blocks are handed out from the lowest ids, so with huge pages the first
  // token's writes would make the kernel zero a 2 MiB page per pool (96 MiB
  // for 24 layers) on the critical path of the first token.
  // REQUIRES: the pools are host memory from MemoryDomain::Allocate.
  void AdviseSmallPages();

 private:
  KvCacheLayout layout_;
  std::vector<DomainBuffer> keys_;
  std::vector<DomainBuffer> values_;
  std::vector<DomainBuffer> key_scales_;
  std::vector<DomainBuffer> value_scales_;
  std::vector<KvPoolPointers> pool_pointers_;
};

// How many blocks fit in `bytes`.
int64_t KvBlocksForBytes(const KvCacheLayout& layout, int64_t bytes);

}  // namespace kiln
