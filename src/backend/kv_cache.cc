// KV pool allocation.
#include "backend/kv_cache.h"

#include <sys/mman.h>

namespace kiln {

int64_t KvCacheLayout::TokenElementBytes() const {
  auto bytes = DTypeBytes(dtype, static_cast<uint64_t>(num_kv_heads * head_dim));
  return bytes ? static_cast<int64_t>(*bytes) : 0;
}

int64_t KvCacheLayout::TokenScaleBytes() const {
  return dtype == DType::kI8 ? num_kv_heads * static_cast<int64_t>(sizeof(float)) : 0;
}

int64_t KvCacheLayout::TokenBytes() const { return TokenElementBytes() + TokenScaleBytes(); }

int64_t KvCacheLayout::BlockBytes() const { return 2 * num_layers * block_size * TokenBytes(); }

int64_t KvCacheLayout::NumWindowLayers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < num_layers && l < static_cast<int64_t>(window_layers.size()); ++l) {
    n += window_layers[static_cast<size_t>(l)] != 0 ? 1 : 0;
  }
  return n;
}

int64_t KvCacheLayout::FullBlockBytes() const {
  return 2 * (num_layers - NumWindowLayers()) * block_size * TokenBytes();
}

int64_t KvCacheLayout::WindowBlockBytes() const { return 2 * NumWindowLayers() * block_size * TokenBytes(); }

Expected<std::unique_ptr<KvCache>> KvCache::Allocate(const KvCacheLayout& layout, MemoryDomain& domain) {
  if (layout.num_layers <= 0 || layout.num_blocks <= 0 || layout.block_size <= 0 || layout.TokenBytes() <= 0) {
    return InvalidArgument("KV cache: invalid layout ({} layers, {} blocks of {} tokens)", layout.num_layers,
                           layout.num_blocks, layout.block_size);
  }
  if (layout.window_num_blocks < 0 ||
      (layout.HasWindowPool() && static_cast<int64_t>(layout.window_layers.size()) != layout.num_layers)) {
    return InvalidArgument("KV cache: window pool of {} blocks with {} layer flags for {} layers",
                           layout.window_num_blocks, layout.window_layers.size(), layout.num_layers);
  }
  auto cache = std::unique_ptr<KvCache>(new KvCache());
  cache->layout_ = layout;
  if (layout.dtype != DType::kF32 && layout.dtype != DType::kF16 && layout.dtype != DType::kBF16 &&
      layout.dtype != DType::kI8) {
    return Unsupported("KV cache: dtype {} (f32, f16, bf16 or i8)", DTypeName(layout.dtype));
  }
  for (int64_t l = 0; l < layout.num_layers; ++l) {
    const size_t slots = static_cast<size_t>(layout.LayerBlocks(l) * layout.block_size);
    const size_t pool = slots * static_cast<size_t>(layout.TokenElementBytes());
    const size_t scales = slots * static_cast<size_t>(layout.TokenScaleBytes());
    KILN_ASSIGN_OR_RETURN(DomainBuffer k, DomainBuffer::Allocate(domain, pool));
    KILN_ASSIGN_OR_RETURN(DomainBuffer v, DomainBuffer::Allocate(domain, pool));
    cache->keys_.push_back(std::move(k));
    cache->values_.push_back(std::move(v));
    if (scales > 0) {
      KILN_ASSIGN_OR_RETURN(DomainBuffer ks, DomainBuffer::Allocate(domain, scales));
      KILN_ASSIGN_OR_RETURN(DomainBuffer vs, DomainBuffer::Allocate(domain, scales));
      cache->key_scales_.push_back(std::move(ks));
      cache->value_scales_.push_back(std::move(vs));
    }
  }
  for (int64_t l = 0; l < layout.num_layers; ++l) {
    cache->pool_pointers_.push_back(
        {cache->keys(l), cache->values(l), cache->key_scales(l), cache->value_scales(l)});
  }
  return cache;
}

void KvCache::AdviseSmallPages() {
  for (const auto* pools : {&keys_, &values_, &key_scales_, &value_scales_}) {
    for (const DomainBuffer& b : *pools) ::madvise(b.data(), b.size(), MADV_NOHUGEPAGE);
  }
}

float* KvCache::key_scales(int64_t layer) const {
  if (key_scales_.empty()) return nullptr;
  return reinterpret_cast<float*>(key_scales_[static_cast<size_t>(layer)].data());
}

float* KvCache::value_scales(int64_t layer) const {
  if (value_scales_.empty()) return nullptr;
  return reinterpret_cast<float*>(value_scales_[static_cast<size_t>(layer)].data());
}

int64_t KvCache::TotalBytes() const {
  return layout_.num_blocks * layout_.FullBlockBytes() + layout_.window_num_blocks * layout_.WindowBlockBytes();
}

int64_t KvBlocksForBytes(const KvCacheLayout& layout, int64_t bytes) {
  int64_t per = layout.BlockBytes();
  return per > 0 ? bytes / per : 0;
}

}  // namespace kiln
