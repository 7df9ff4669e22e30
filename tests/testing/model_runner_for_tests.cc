// DirectRunner.
#include "testing/model_runner_for_tests.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/forward_batch_builder.h"

namespace kiln::testing {

DirectRunner::DirectRunner(CompiledModel& model, int64_t max_seqs, int64_t max_len)
    : model_(model), max_seqs_(max_seqs), max_len_(max_len) {
  int64_t bs = model.options().block_size;
  blocks_per_seq_ = (max_len + bs - 1) / bs;
  auto cache = model.AllocateKvCache(blocks_per_seq_ * max_seqs);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  cache_ = std::move(cache).value();
  for (int64_t s = 0; s < max_seqs; ++s) {
    std::vector<int32_t> t;
    for (int64_t b = 0; b < blocks_per_seq_; ++b) t.push_back(static_cast<int32_t>(s * blocks_per_seq_ + b));
    tables_.push_back(std::move(t));
  }
}

std::vector<std::vector<float>> DirectRunner::Prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                      int64_t chunk, bool all_positions) {
  const int64_t vocab = model_.config().vocab_size;
  std::vector<std::vector<float>> result(prompts.size());
  std::vector<size_t> done(prompts.size(), 0);
  while (true) {
    ForwardBatchBuilder builder;
    std::vector<int32_t> rows;
    std::vector<size_t> seq_index;
    for (size_t s = 0; s < prompts.size(); ++s) {
      if (done[s] == prompts[s].size()) continue;
      size_t n = std::min<size_t>(static_cast<size_t>(chunk), prompts[s].size() - done[s]);
      for (size_t i = 0; i < n; ++i) {
        builder.AddToken(prompts[s][done[s] + i], static_cast<int32_t>(done[s] + i));
        bool last = done[s] + i + 1 == prompts[s].size();
        if (all_positions || last) {
          rows.push_back(builder.num_tokens() - 1);
          builder.AddOutputRow(rows.back());
        }
      }
      builder.EndSequence(static_cast<int32_t>(done[s] + n), tables_[s].data());
      seq_index.push_back(s);
      done[s] += n;
    }
    if (seq_index.empty()) break;
    const ForwardBatch b = builder.Batch();
    const int32_t* qstart = b.query_start;
    std::vector<float> logits(rows.size() * static_cast<size_t>(vocab));
    Status st = model_.Forward(b, *cache_, logits.data(), vocab);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return {};
    // Hand each output row to its sequence.
    size_t r = 0;
    for (size_t local = 0; local < seq_index.size(); ++local) {
      size_t s = seq_index[local];
      for (int32_t t = qstart[local]; t < qstart[local + 1]; ++t) {
        if (r < rows.size() && rows[r] == t) {
          if (!all_positions) result[s].clear();
          result[s].insert(result[s].end(), logits.begin() + static_cast<int64_t>(r) * vocab,
                           logits.begin() + static_cast<int64_t>(r + 1) * vocab);
          ++r;
        }
      }
    }
  }
  return result;
}

std::vector<int32_t> DirectRunner::Greedy(const std::vector<int32_t>& prompt, int n, int64_t chunk) {
  auto argmax = [](const std::vector<float>& l) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  };
  std::vector<int32_t> tokens = prompt;
  auto first = Prefill({prompt}, chunk, false);
  if (first.empty()) return {};
  std::vector<int32_t> out{argmax(first[0])};
  const int64_t vocab = model_.config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(vocab));
  while (static_cast<int>(out.size()) < n) {
    tokens.push_back(out.back());
    const auto p = static_cast<int32_t>(tokens.size() - 1);
    ForwardBatchBuilder builder;
    builder.AddToken(out.back(), p);
    builder.EndSequence(p + 1, tables_[0].data());
    builder.AddOutputRow(0);
    const ForwardBatch b = builder.Batch();
    Status st = model_.Forward(b, *cache_, logits.data(), vocab);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    out.push_back(argmax(logits));
  }
  return out;
}

}  // namespace kiln::testing
