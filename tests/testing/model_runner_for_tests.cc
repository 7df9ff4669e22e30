// DirectRunner.
#include "testing/model_runner_for_tests.h"

#include <gtest/gtest.h>

#include <algorithm>

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
    std::vector<int32_t> ids, pos, seq, qstart{0}, lens, rows;
    std::vector<const int32_t*> tables;
    std::vector<size_t> seq_index;
    for (size_t s = 0; s < prompts.size(); ++s) {
      if (done[s] == prompts[s].size()) continue;
      size_t n = std::min<size_t>(static_cast<size_t>(chunk), prompts[s].size() - done[s]);
      int32_t local = static_cast<int32_t>(tables.size());
      for (size_t i = 0; i < n; ++i) {
        ids.push_back(prompts[s][done[s] + i]);
        pos.push_back(static_cast<int32_t>(done[s] + i));
        seq.push_back(local);
        bool last = done[s] + i + 1 == prompts[s].size();
        if (all_positions || last) rows.push_back(static_cast<int32_t>(ids.size() - 1));
      }
      qstart.push_back(static_cast<int32_t>(ids.size()));
      lens.push_back(static_cast<int32_t>(done[s] + n));
      tables.push_back(tables_[s].data());
      seq_index.push_back(s);
      done[s] += n;
    }
    if (tables.empty()) break;
    ForwardBatch b;
    b.num_tokens = static_cast<int32_t>(ids.size());
    b.token_ids = ids.data();
    b.positions = pos.data();
    b.token_seq = seq.data();
    b.num_seqs = static_cast<int32_t>(tables.size());
    b.query_start = qstart.data();
    b.seq_lens = lens.data();
    b.block_tables = tables.data();
    b.num_output_rows = static_cast<int32_t>(rows.size());
    b.output_rows = rows.data();
    std::vector<float> logits(rows.size() * static_cast<size_t>(vocab));
    Status st = model_.Forward(b, *cache_, logits.data(), vocab);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return {};
    // Hand each output row to its sequence.
    size_t r = 0;
    for (size_t local = 0; local < tables.size(); ++local) {
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
    int32_t id = out.back(), p = static_cast<int32_t>(tokens.size() - 1), seq = 0, len = p + 1, row = 0;
    int32_t qstart[2] = {0, 1};
    const int32_t* table = tables_[0].data();
    ForwardBatch b;
    b.num_tokens = 1;
    b.token_ids = &id;
    b.positions = &p;
    b.token_seq = &seq;
    b.num_seqs = 1;
    b.query_start = qstart;
    b.seq_lens = &len;
    b.block_tables = &table;
    b.num_output_rows = 1;
    b.output_rows = &row;
    Status st = model_.Forward(b, *cache_, logits.data(), vocab);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    out.push_back(argmax(logits));
  }
  return out;
}

}  // namespace kiln::testing
