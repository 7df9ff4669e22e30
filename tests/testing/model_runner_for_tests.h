// Drives a CompiledModel directly (no engine) for the model tests: several
// sequences at once, prompts fed in chunks, greedy decoding. Each sequence
// owns a contiguous range of KV blocks.
#pragma once

#include <memory>
#include <vector>

#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"

namespace kiln::testing {

class DirectRunner {
 public:
  // REQUIRES: model outlives the runner. Room for `max_seqs` sequences of
  // up to `max_len` tokens.
  DirectRunner(CompiledModel& model, int64_t max_seqs, int64_t max_len);

  // Feeds the prompts of all sequences together, `chunk` tokens of each per
  // forward pass, from empty caches. Returns, per sequence, the logits of
  // every position (all_positions) or of the last one, vocab floats each.
  std::vector<std::vector<float>> Prefill(const std::vector<std::vector<int32_t>>& prompts, int64_t chunk,
                                          bool all_positions);

  // Greedy continuation of one prompt: n tokens, argmax (lowest id on ties).
  std::vector<int32_t> Greedy(const std::vector<int32_t>& prompt, int n, int64_t chunk = 1 << 30);

 private:
  CompiledModel& model_;
  int64_t max_seqs_, max_len_, blocks_per_seq_;
  std::unique_ptr<KvCache> cache_;
  std::vector<std::vector<int32_t>> tables_;
};

}  // namespace kiln::testing
