// Block tables of a forward session's sequences.
#include "capi/kv_block_pool.h"

namespace kiln::capi {

KvBlockPool::KvBlockPool(int32_t num_blocks, int32_t block_size, int32_t num_seqs)
    : block_size_(block_size), seqs_(static_cast<size_t>(num_seqs)) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 handed out first
}

int32_t KvBlockPool::BlocksFor(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
}

bool KvBlockPool::Grow(int32_t seq, int32_t length) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const size_t needed = static_cast<size_t>(BlocksFor(length));
  if (needed > s.blocks.size() && needed - s.blocks.size() > free_.size()) return false;
  while (s.blocks.size() < needed) {
    s.blocks.push_back(free_.back());
    free_.pop_back();
  }
  s.length = length;
  return true;
}

void KvBlockPool::Truncate(int32_t seq, int32_t length) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  const size_t keep = static_cast<size_t>(BlocksFor(length));
  while (s.blocks.size() > keep) {
    free_.push_back(s.blocks.back());
    s.blocks.pop_back();
  }
  s.length = length;
}

}  // namespace kiln::capi
