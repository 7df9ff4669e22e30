// Fills the arrays a ForwardBatch points into, sequence by sequence, and
// keeps them between passes so that a step allocates little (the engine's
// model runner and the draft-model proposer build theirs this way).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/forward_batch.h"

namespace kiln {

class ForwardBatchBuilder {
 public:
  // Starts an empty batch.
  void Clear() {
    token_ids_.clear();
    positions_.clear();
    token_seq_.clear();
    query_start_.assign(1, 0);
    seq_lens_.clear();
    block_tables_.clear();
    window_block_tables_.clear();
    output_rows_.clear();
  }

  // Adds a token of the sequence being built (the first sequence after
  // Clear, the next one after each EndSequence), in position order.
  void AddToken(int32_t token, int32_t position) {
    token_ids_.push_back(token);
    positions_.push_back(position);
    token_seq_.push_back(static_cast<int32_t>(seq_lens_.size()));
  }

  // Ends the sequence: `seq_len` tokens in its cache once the pass has
  // written its own, its KV blocks in `block_table` (and in
  // `window_block_table` for a cache with a window pool: every sequence of
  // the batch gives one, or none does).
  void EndSequence(int32_t seq_len, const int32_t* block_table, const int32_t* window_block_table = nullptr) {
    query_start_.push_back(num_tokens());
    seq_lens_.push_back(seq_len);
    block_tables_.push_back(block_table);
    if (window_block_table != nullptr) window_block_tables_.push_back(window_block_table);
  }

  // Asks for the logits of token `row` (an index into the batch's tokens).
  void AddOutputRow(int32_t row) { output_rows_.push_back(row); }

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids_.size()); }
  int32_t num_output_rows() const { return static_cast<int32_t>(output_rows_.size()); }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  const std::vector<int32_t>& positions() const { return positions_; }
  const std::vector<int32_t>& token_seq() const { return token_seq_; }

  // The batch, pointing into this builder: valid until it changes.
  ForwardBatch Batch() const {
    ForwardBatch fb;
    fb.num_tokens = num_tokens();
    fb.token_ids = token_ids_.data();
    fb.positions = positions_.data();
    fb.token_seq = token_seq_.data();
    fb.num_seqs = static_cast<int32_t>(seq_lens_.size());
    fb.query_start = query_start_.data();
    fb.seq_lens = seq_lens_.data();
    fb.block_tables = block_tables_.data();
    fb.window_block_tables = window_block_tables_.empty() ? nullptr : window_block_tables_.data();
    fb.num_output_rows = num_output_rows();
    fb.output_rows = output_rows_.data();
    return fb;
  }

 private:
  std::vector<int32_t> token_ids_, positions_, token_seq_, query_start_{0}, seq_lens_, output_rows_;
  std::vector<const int32_t*> block_tables_, window_block_tables_;
};

}  // namespace kiln
