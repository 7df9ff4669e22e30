// The KV cache bookkeeping of a forward session: a fixed pool of blocks
// and, per sequence id, its length and the blocks that hold it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::capi {

class KvBlockPool {
 public:
  // REQUIRES: num_blocks, block_size and num_seqs positive.
  KvBlockPool(int32_t num_blocks, int32_t block_size, int32_t num_seqs);

  int32_t num_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()); }
  // Blocks needed for `num_tokens` tokens.
  int32_t BlocksFor(int64_t num_tokens) const;

  // REQUIRES (all below): 0 <= seq < num_seqs().
  int32_t length(int32_t seq) const { return seqs_[static_cast<size_t>(seq)].length; }
  // Covers at least length(seq) tokens; the data stays put until the
  // sequence grows or shrinks.
  const std::vector<int32_t>& block_table(int32_t seq) const {
    return seqs_[static_cast<size_t>(seq)].blocks;
  }

  // Makes the sequence `length` tokens long, taking the blocks it needs
  // beyond those it holds. False, changing nothing, when too few are free.
  // REQUIRES: length >= length(seq).
  bool Grow(int32_t seq, int32_t length);

  // Shortens the sequence to `length` tokens and returns the blocks beyond
  // them to the pool. REQUIRES: 0 <= length <= length(seq).
  void Truncate(int32_t seq, int32_t length);

 private:
  struct Seq {
    int32_t length = 0;
    std::vector<int32_t> blocks;
  };

  int32_t block_size_;
  std::vector<int32_t> free_;  // a stack: the last freed is reused first
  std::vector<Seq> seqs_;
};

}  // namespace kiln::capi
