// Reference-counted KV blocks with a hash-chained prefix cache.
#include "engine/block_manager.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <unordered_set>

namespace kiln {

// A block's hash covers its parent's hash (as the seed) and its token ids,
// so equal hashes mean, barring collisions, equal whole prefixes.
uint64_t BlockManager::ChainHash(uint64_t parent, std::span<const int32_t> tokens) {
  return XXH64(tokens.data(), tokens.size_bytes(), parent);
}

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t window)
    : block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      window_(window),
      blocks_(static_cast<size_t>(num_blocks)) {
  assert(num_blocks > 0 && block_size > 0 && window >= 0);
  for (int32_t id = 0; id < num_blocks; ++id) PushFree(id, /*to_front=*/false);
}

int32_t BlockManager::BlocksForTokens(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
}

void BlockManager::HashBlocks(Sequence& seq, int32_t num_full_blocks) const {
  auto& hashes = seq.block_hashes;
  for (auto i = static_cast<int32_t>(hashes.size()); i < num_full_blocks; ++i) {
    uint64_t parent = i == 0 ? kRootHash : hashes[static_cast<size_t>(i - 1)];
    auto tokens =
        std::span<const int32_t>(seq.tokens).subspan(static_cast<size_t>(i) * block_size_, block_size_);
    hashes.push_back(ChainHash(parent, tokens));
  }
}

int32_t BlockManager::CachedBlockAt(const Sequence& seq, int32_t i) const {
  auto it = cached_.find(seq.block_hashes[static_cast<size_t>(i)]);
  if (it == cached_.end()) return kNil;
  const Block& block = blocks_[static_cast<size_t>(it->second)];
  auto begin = seq.tokens.begin() + static_cast<std::ptrdiff_t>(i) * block_size_;
  // Unequal tokens: a collision.
  return std::equal(block.tokens.begin(), block.tokens.end(), begin, begin + block_size_) ? it->second : kNil;
}

CachedPrefix BlockManager::FindCachedPrefix(Sequence& seq) {
  assert(Table(seq).empty());
  CachedPrefix prefix;
  if (!prefix_caching_) return prefix;
  // At least the last token is computed, so that the pass has a row whose
  // logits it can sample from.
  int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  HashBlocks(seq, max_blocks);
  for (int32_t i = 0; i < max_blocks; ++i) {
    const int32_t id = CachedBlockAt(seq, i);
    if (id == kNil) break;
    prefix.blocks.push_back(id);
  }
  prefix.num_tokens = static_cast<int32_t>(prefix.blocks.size()) * block_size_;
  return prefix;
}

CachedPrefix BlockManager::FindWindowPrefix(Sequence& seq, CachedPrefix& prefix) {
  assert(window_ > 0 && Table(seq).empty());
  CachedPrefix found;
  if (!prefix_caching_) {
    prefix = {};
    return found;
  }
  HashBlocks(seq, static_cast<int32_t>(prefix.blocks.size()));
  // The longest hit whose first query (at the hit's end) finds every block
  // it sees here too.
  for (auto n = static_cast<int32_t>(prefix.blocks.size()); n > 0; --n) {
    const int32_t first = std::max(0, n * block_size_ - window_ + 1) / block_size_;
    found.blocks.assign(static_cast<size_t>(first), kNil);
    bool all = true;
    for (int32_t i = first; i < n && all; ++i) {
      const int32_t id = CachedBlockAt(seq, i);
      all = id != kNil;
      found.blocks.push_back(id);
    }
    if (all) {
      found.num_tokens = n * block_size_;
      prefix.blocks.resize(static_cast<size_t>(n));
      prefix.num_tokens = found.num_tokens;
      return found;
    }
  }
  prefix = {};
  return {};
}

int32_t BlockManager::BlocksToTake(const Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix) const {
  const std::vector<int32_t>& table = Table(seq);
  const bool admitting = table.empty();
  int32_t computed = admitting ? prefix.num_tokens : seq.num_computed_tokens;
  auto held = static_cast<int32_t>(admitting ? prefix.blocks.size() : table.size());
  int32_t needed = std::max(0, BlocksForTokens(static_cast<int64_t>(computed) + num_new_tokens) - held);
  // Cache hits on free blocks take them out of the free queue too.
  int32_t revived = 0;
  for (int32_t id : prefix.blocks) {
    revived += id != kNil && blocks_[static_cast<size_t>(id)].ref_count == 0 ? 1 : 0;
  }
  return needed + revived;
}

bool BlockManager::CanAllocate(const Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix) const {
  return BlocksToTake(seq, num_new_tokens, prefix) <= num_free_;
}

bool BlockManager::AllocateSlots(Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix) {
  assert(num_new_tokens >= 1);
  std::vector<int32_t>& table = Table(seq);
  assert(prefix.blocks.empty() || table.empty());
  const bool admitting = table.empty();
  if (BlocksToTake(seq, num_new_tokens, prefix) > num_free_) return false;
  const int32_t computed = admitting ? prefix.num_tokens : seq.num_computed_tokens;
  const auto held = static_cast<int32_t>(admitting ? prefix.blocks.size() : table.size());
  const int32_t needed = std::max(0, BlocksForTokens(static_cast<int64_t>(computed) + num_new_tokens) - held);

  if (admitting) {
    for (int32_t id : prefix.blocks) {
      if (id != kNil) Acquire(id);
    }
    table = prefix.blocks;
    seq.num_computed_tokens = prefix.num_tokens;
    Committed(seq) = static_cast<int32_t>(prefix.blocks.size());
    if (prefix_caching_ && window_ == 0) {
      stats_.queries += seq.num_tokens();
      stats_.hits += prefix.num_tokens;
    }
  }
  for (int32_t i = 0; i < needed; ++i) {
    int32_t id = PopFreeBlock();
    blocks_[static_cast<size_t>(id)].ref_count = 1;
    table.push_back(id);
  }
  return true;
}

void BlockManager::CacheComputedBlocks(Sequence& seq) {
  if (!prefix_caching_) return;
  const std::vector<int32_t>& table = Table(seq);
  int32_t& committed = Committed(seq);
  int32_t full = std::min(seq.num_computed_tokens / block_size_, static_cast<int32_t>(table.size()));
  if (full <= committed) return;
  HashBlocks(seq, full);
  for (int32_t i = committed; i < full; ++i) {
    const int32_t id = table[static_cast<size_t>(i)];
    if (id == kNil) continue;  // released before it was offered: never, as the engine calls these
    Block& block = blocks_[static_cast<size_t>(id)];
    if (block.has_hash) continue;
    uint64_t hash = seq.block_hashes[static_cast<size_t>(i)];
    // Another sequence may have computed the same prefix at the same time;
    // the first block registered keeps the entry and this one stays private.
    if (!cached_.emplace(hash, id).second) continue;
    block.has_hash = true;
    block.hash = hash;
    auto begin = seq.tokens.begin() + static_cast<std::ptrdiff_t>(i) * block_size_;
    block.tokens.assign(begin, begin + block_size_);
  }
  committed = full;
}

void BlockManager::TruncateSlots(Sequence& seq, int32_t num_tokens) {
  std::vector<int32_t>& table = Table(seq);
  const int32_t keep = BlocksForTokens(num_tokens);
  assert(keep >= Committed(seq));
  while (static_cast<int32_t>(table.size()) > keep) {
    const int32_t id = table.back();
    table.pop_back();
    Block& block = blocks_[static_cast<size_t>(id)];
    assert(block.ref_count == 1 && !block.has_hash);
    block.ref_count = 0;
    PushFree(id, /*to_front=*/true);
  }
}

void BlockManager::Free(Sequence& seq) {
  std::vector<int32_t>& table = Table(seq);
  // Last blocks first: a prefix is only useful with its beginning, so the
  // tail of a sequence should be evicted before its head.
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    if (*it == kNil) continue;  // released already
    Block& block = blocks_[static_cast<size_t>(*it)];
    assert(block.ref_count > 0);
    if (--block.ref_count == 0) {
      // Blocks without a cached prefix are worth nothing: reuse them first.
      PushFree(*it, /*to_front=*/!block.has_hash);
    }
  }
  table.clear();
  Committed(seq) = 0;
}

int32_t BlockManager::FirstWindowEntry(const Sequence& seq) const {
  if (window_ == 0) return 0;
  const int32_t first_visible = std::max(0, seq.num_computed_tokens - window_ + 1);
  return std::min(first_visible / block_size_, static_cast<int32_t>(Table(seq).size()));
}

int32_t BlockManager::ReleaseOutsideWindow(Sequence& seq) {
  std::vector<int32_t>& table = Table(seq);
  const int32_t end = FirstWindowEntry(seq);
  int32_t released = 0;
  for (int32_t i = 0; i < end; ++i) {
    int32_t& id = table[static_cast<size_t>(i)];
    if (id == kNil) continue;
    Block& block = blocks_[static_cast<size_t>(id)];
    assert(block.ref_count > 0);
    // A block with a cached prefix stays findable (at the back of the
    // queue) for a later sequence's prefix hit.
    if (--block.ref_count == 0) PushFree(id, /*to_front=*/!block.has_hash);
    id = kNil;
    ++released;
  }
  return released;
}

int32_t BlockManager::HeldBlocks(const std::vector<int32_t>& table) {
  return static_cast<int32_t>(std::count_if(table.begin(), table.end(), [](int32_t id) { return id != kNil; }));
}

BlockManager::AdoptedBlock BlockManager::AdoptTransferredBlock(uint64_t hash, std::span<const int32_t> tokens) {
  assert(static_cast<int32_t>(tokens.size()) == block_size_);
  AdoptedBlock adopted;
  if (!prefix_caching_) return adopted;
  if (cached_.count(hash) != 0) {
    adopted.already_cached = true;
    return adopted;
  }
  adopted.id = TakePrivateBlock();
  if (adopted.id >= 0) FileTransferredBlock(adopted.id, hash, tokens);
  return adopted;
}

int32_t BlockManager::TakePrivateBlock() {
  if (!prefix_caching_ || num_free_ == 0) return kNil;
  const int32_t id = PopFreeBlock();
  blocks_[static_cast<size_t>(id)].ref_count = 1;
  return id;
}

bool BlockManager::FileTransferredBlock(int32_t id, uint64_t hash, std::span<const int32_t> tokens) {
  assert(static_cast<int32_t>(tokens.size()) == block_size_);
  Block& block = blocks_[static_cast<size_t>(id)];
  assert(block.ref_count == 1 && !block.has_hash);
  if (cached_.count(hash) != 0) return false;
  block.has_hash = true;
  block.hash = hash;
  block.tokens.assign(tokens.begin(), tokens.end());
  cached_.emplace(hash, id);
  return true;
}

void BlockManager::FreePrivateBlock(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  assert(block.ref_count == 1 && !block.has_hash);
  block.ref_count = 0;
  PushFree(id, /*to_front=*/true);
}

void BlockManager::ReleaseTransferredBlock(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  assert(block.ref_count > 0);
  if (--block.ref_count == 0) PushFree(id, /*to_front=*/false);
}

int32_t BlockManager::PopFreeBlock() {
  int32_t id = free_head_;
  assert(id != kNil);
  RemoveFromFreeQueue(id);
  Block& block = blocks_[static_cast<size_t>(id)];
  if (block.has_hash) {
    cached_.erase(block.hash);
    block.has_hash = false;
    block.tokens.clear();
  }
  return id;
}

void BlockManager::PushFree(int32_t id, bool to_front) {
  Block& block = blocks_[static_cast<size_t>(id)];
  block.in_free_queue = true;
  if (to_front) {
    block.prev = kNil;
    block.next = free_head_;
    if (free_head_ != kNil) blocks_[static_cast<size_t>(free_head_)].prev = id;
    free_head_ = id;
    if (free_tail_ == kNil) free_tail_ = id;
  } else {
    block.next = kNil;
    block.prev = free_tail_;
    if (free_tail_ != kNil) blocks_[static_cast<size_t>(free_tail_)].next = id;
    free_tail_ = id;
    if (free_head_ == kNil) free_head_ = id;
  }
  ++num_free_;
}

void BlockManager::RemoveFromFreeQueue(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  assert(block.in_free_queue);
  if (block.prev != kNil) {
    blocks_[static_cast<size_t>(block.prev)].next = block.next;
  } else {
    free_head_ = block.next;
  }
  if (block.next != kNil) {
    blocks_[static_cast<size_t>(block.next)].prev = block.prev;
  } else {
    free_tail_ = block.prev;
  }
  block.prev = block.next = kNil;
  block.in_free_queue = false;
  --num_free_;
}

void BlockManager::Acquire(int32_t id) {
  Block& block = blocks_[static_cast<size_t>(id)];
  if (block.ref_count == 0) RemoveFromFreeQueue(id);
  ++block.ref_count;
}

Status BlockManager::CheckInvariants(std::span<const Sequence* const> holders) const {
  std::vector<int32_t> expected_refs(blocks_.size(), 0);
  for (const Sequence* seq : holders) {
    std::unordered_set<int32_t> own;
    const std::vector<int32_t>& table = Table(*seq);
    const int32_t first_entry = FirstWindowEntry(*seq);
    for (size_t i = 0; i < table.size(); ++i) {
      const int32_t id = table[i];
      const bool released = static_cast<int32_t>(i) < first_entry;
      if (released != (id == kNil)) {
        return Internal("sequence {}: window entry {} is {} with {} computed tokens (window {}, first held entry {})",
                        seq->id, i, id, seq->num_computed_tokens, window_, first_entry);
      }
      if (released) continue;
      if (id < 0 || id >= num_blocks()) {
        return Internal("sequence {}: block id {} outside the pool of {}", seq->id, id, num_blocks());
      }
      if (!own.insert(id).second) return Internal("sequence {}: block {} appears twice", seq->id, id);
      ++expected_refs[static_cast<size_t>(id)];
    }
    if (seq->num_computed_tokens > static_cast<int64_t>(table.size()) * block_size_) {
      return Internal("sequence {}: {} computed tokens but only {} blocks", seq->id, seq->num_computed_tokens,
                      table.size());
    }
  }
  // Walk the free queue both ways.
  std::vector<uint8_t> queued(blocks_.size(), 0);
  int32_t count = 0, prev = kNil;
  for (int32_t id = free_head_; id != kNil; id = blocks_[static_cast<size_t>(id)].next) {
    if (id < 0 || id >= num_blocks()) return Internal("free queue: link to block {} outside the pool", id);
    if (queued[static_cast<size_t>(id)]) return Internal("free queue: block {} appears twice", id);
    if (blocks_[static_cast<size_t>(id)].prev != prev) {
      return Internal("free queue: block {} has a wrong back link", id);
    }
    queued[static_cast<size_t>(id)] = 1;
    prev = id;
    ++count;
  }
  if (prev != free_tail_) return Internal("free queue: tail is {} but the walk ends at {}", free_tail_, prev);
  if (count != num_free_) return Internal("free queue: {} blocks counted, {} recorded", count, num_free_);
  for (size_t id = 0; id < blocks_.size(); ++id) {
    const Block& block = blocks_[id];
    if (block.ref_count != expected_refs[id]) {
      return Internal("block {}: reference count {} but {} block tables hold it", id, block.ref_count,
                      expected_refs[id]);
    }
    if (block.in_free_queue != (queued[id] != 0)) return Internal("block {}: free-queue flag disagrees", id);
    if ((block.ref_count == 0) != block.in_free_queue) {
      return Internal("block {}: reference count {} but {} the free queue", id, block.ref_count,
                      block.in_free_queue ? "in" : "not in");
    }
    if (block.has_hash) {
      auto it = cached_.find(block.hash);
      if (it == cached_.end() || it->second != static_cast<int32_t>(id)) {
        return Internal("block {}: carries a hash the prefix cache does not map to it", id);
      }
      if (static_cast<int32_t>(block.tokens.size()) != block_size_) {
        return Internal("block {}: cached with {} tokens, not a full block", id, block.tokens.size());
      }
    }
  }
  for (const auto& [hash, id] : cached_) {
    if (id < 0 || id >= num_blocks() || !blocks_[static_cast<size_t>(id)].has_hash ||
        blocks_[static_cast<size_t>(id)].hash != hash) {
      return Internal("prefix cache: entry {:#x} names block {}, which does not carry it", hash, id);
    }
  }
  if (!prefix_caching_ && !cached_.empty()) return Internal("prefix cache: entries while caching is off");
  return Status::Ok();
}

}  // namespace kiln
