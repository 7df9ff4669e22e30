// The paged KV cache's bookkeeping: fixed-size blocks shared by reference
// count, and a prefix cache of full blocks found by a chained hash of their
// tokens. Freed blocks that carry a hash stay findable until evicted, least
// recently freed first.
//
// A second BlockManager may keep the window pool: the blocks of the
// sliding-window layers, in seq.window_block_table, under the same chained
// hashes. It releases the blocks that fall wholly out of the window of
// every query a sequence can still make.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/sequence.h"

namespace kiln {

// Full blocks at the start of a sequence's tokens that are already in the
// cache, found by BlockManager::FindCachedPrefix.
struct CachedPrefix {
  std::vector<int32_t> blocks;
  int32_t num_tokens = 0;
};

struct PrefixCacheStats {
  int64_t queries = 0;  // tokens looked up when sequences were admitted
  int64_t hits = 0;     // of those, tokens found in the cache
};

class BlockManager {
 public:
  // The full pool (window 0: seq.block_table), or with window > 0 the
  // window pool of layers that attend to the last `window` positions
  // (seq.window_block_table).
  // REQUIRES: num_blocks > 0, block_size > 0, window >= 0.
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t window = 0);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int32_t window() const { return window_; }
  // Blocks no sequence holds (some may still carry cached prefixes).
  int32_t num_free_blocks() const { return num_free_; }
  int32_t num_used_blocks() const { return num_blocks() - num_free_; }
  const PrefixCacheStats& prefix_stats() const { return stats_; }

  // Blocks needed to hold `num_tokens` tokens.
  int32_t BlocksForTokens(int64_t num_tokens) const;

  // The longest run of full blocks at the start of seq.tokens whose hash is
  // in the cache and whose stored tokens equal the sequence's, leaving at
  // least one token to compute (a fully cached prompt backs off one whole
  // block, so no shared block is ever written). Empty when prefix caching is
  // off. Takes no references: pass the result to AllocateSlots.
  // REQUIRES: seq holds no blocks.
  CachedPrefix FindCachedPrefix(Sequence& seq);

  // The window pool's part of a prefix hit: the blocks the first query
  // after `prefix` (the full pool's hit) sees, with -1 before them. When
  // this pool no longer caches them all, `prefix` is shortened to the
  // longest hit both pools can serve (possibly none). Empty when prefix
  // caching is off. Takes no references.
  // REQUIRES: a window pool; seq holds no window blocks; prefix from the
  // full pool's FindCachedPrefix(seq).
  CachedPrefix FindWindowPrefix(Sequence& seq, CachedPrefix& prefix);

  // Whether AllocateSlots(seq, num_new_tokens, prefix) would succeed.
  bool CanAllocate(const Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix = {}) const;

  // Makes seq.block_table cover its computed tokens plus `num_new_tokens`.
  // For a sequence without blocks, `prefix` (from FindCachedPrefix) is
  // adopted first and its tokens counted as computed and cached. Returns
  // false, changing nothing, when too few blocks are free.
  // REQUIRES: num_new_tokens >= 1; prefix is empty unless seq holds no blocks.
  bool AllocateSlots(Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix = {});

  // Drops the blocks at the end of seq.block_table that hold none of its
  // first `num_tokens` tokens (the slots of rejected draft tokens). Kept
  // blocks keep their contents: nothing is copied.
  // REQUIRES: the dropped blocks were never offered to the prefix cache.
  void TruncateSlots(Sequence& seq, int32_t num_tokens);

  // Offers the sequence's newly full, computed blocks to the prefix cache.
  // Call after a pass that advanced seq.num_computed_tokens.
  void CacheComputedBlocks(Sequence& seq);

  // Drops the sequence's references to its blocks and empties its block
  // table; blocks nobody holds go back to the free queue.
  void Free(Sequence& seq);

  // Window pool: releases (sets to -1, dropping the reference) the entries
  // of seq.window_block_table wholly before the first position any future
  // query can see. A query at position p sees (p - window, p], and the
  // next is at num_computed_tokens or later, so entry i goes once
  // (i + 1) * block_size <= num_computed_tokens - window + 1. Returns how
  // many went. Call after the computed tokens advance.
  int32_t ReleaseOutsideWindow(Sequence& seq);
  // Entries of the window table below this one are released (0 for the
  // full pool).
  int32_t FirstWindowEntry(const Sequence& seq) const;
  // Blocks a sequence holds in this pool (its table's entries but -1).
  static int32_t HeldBlocks(const std::vector<int32_t>& table);

  // The prefix cache's hash of a full block of `tokens` after the block
  // hashed `parent` (kRootHash for a sequence's first block): the same in
  // every process, so that another instance's blocks can be filed here.
  static constexpr uint64_t kRootHash = 0x6b696c6e2d6b7621ull;
  static uint64_t ChainHash(uint64_t parent, std::span<const int32_t> tokens);

  // Files a block computed by another instance under `hash` (of `tokens`):
  // takes a free block, holds one reference to it (the caller writes its
  // keys and values, then calls ReleaseTransferredBlock) and enters it in
  // the prefix cache. already_cached when the hash is there already
  // (nothing taken); id -1 when prefix caching is off or no block is free.
  // TakePrivateBlock then FileTransferredBlock, for a block that lands whole.
  // REQUIRES: tokens.size() == block_size.
  struct AdoptedBlock {
    int32_t id = -1;
    bool already_cached = false;
  };
  AdoptedBlock AdoptTransferredBlock(uint64_t hash, std::span<const int32_t> tokens);
  // A block that lands in parts: a free block held by one reference and in
  // no hash table, so that no sequence finds it while it is written
  // (evicting what the free block cached). -1 when prefix caching is off or
  // no block is free.
  int32_t TakePrivateBlock();
  bool IsCached(uint64_t hash) const { return cached_.count(hash) != 0; }
  // Enters a private block, written in full, in the prefix cache under
  // `hash` (of `tokens`); the reference stays (ReleaseTransferredBlock drops
  // it). False, changing nothing, when the hash is cached already: the
  // caller then frees the block with FreePrivateBlock.
  // REQUIRES: id came from TakePrivateBlock and was not filed;
  // tokens.size() == block_size.
  bool FileTransferredBlock(int32_t id, uint64_t hash, std::span<const int32_t> tokens);
  // Gives back a private block that was never filed (its contents are
  // worthless: it is the next to be taken).
  void FreePrivateBlock(int32_t id);
  // Drops AdoptTransferredBlock's reference: the block is an ordinary
  // prefix-cache entry, evictable once no sequence holds it.
  void ReleaseTransferredBlock(int32_t id);

  // Checks the bookkeeping against the sequences that hold blocks: each
  // block's reference count equals the number of block tables naming it, a
  // block is in the free queue exactly when no one holds it, the free queue
  // has no repeats, and every cached hash names a full block with that hash.
  // A window pool's tables hold -1 exactly below FirstWindowEntry.
  // An Internal error describes the first inconsistency.
  Status CheckInvariants(std::span<const Sequence* const> holders) const;

 private:
  static constexpr int32_t kNil = -1;

  struct Block {
    int32_t ref_count = 0;
    bool has_hash = false;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;  // the block's tokens, kept to confirm hash hits
    // Free-queue links (kNil at the ends); valid while in_free_queue.
    int32_t prev = kNil;
    int32_t next = kNil;
    bool in_free_queue = false;
  };

  // The table and committed count this pool keeps in a sequence.
  std::vector<int32_t>& Table(Sequence& seq) const {
    return window_ > 0 ? seq.window_block_table : seq.block_table;
  }
  const std::vector<int32_t>& Table(const Sequence& seq) const {
    return window_ > 0 ? seq.window_block_table : seq.block_table;
  }
  int32_t& Committed(Sequence& seq) const {
    return window_ > 0 ? seq.num_window_committed_blocks : seq.num_committed_blocks;
  }
  // The cached block of full block i of seq's tokens, or kNil.
  int32_t CachedBlockAt(const Sequence& seq, int32_t i) const;
  // Blocks to take from the free queue for AllocateSlots.
  int32_t BlocksToTake(const Sequence& seq, int32_t num_new_tokens, const CachedPrefix& prefix) const;
  // Fills seq.block_hashes for its first `num_full_blocks` full blocks.
  void HashBlocks(Sequence& seq, int32_t num_full_blocks) const;
  // Takes the least recently freed block, evicting its cached prefix.
  int32_t PopFreeBlock();
  void PushFree(int32_t id, bool to_front);
  void RemoveFromFreeQueue(int32_t id);
  // Holds one more reference to a block (a cache hit may revive a free one).
  void Acquire(int32_t id);

  int32_t block_size_;
  bool prefix_caching_;
  int32_t window_;
  std::vector<Block> blocks_;
  int32_t free_head_ = kNil;  // next to evict
  int32_t free_tail_ = kNil;  // most recently freed
  int32_t num_free_ = 0;
  std::unordered_map<uint64_t, int32_t> cached_;  // hash -> block
  PrefixCacheStats stats_;
};

}  // namespace kiln
