// Chunked perplexity evaluation on a compiled model.
#include "accuracy/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "backend/forward_batch.h"
#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"

namespace kiln {

const char* ScoreModeName(ScoreMode mode) { return mode == ScoreMode::kAll ? "all" : "second-half"; }

Expected<ScoreMode> ParseScoreMode(std::string_view name) {
  if (name == "second-half") return ScoreMode::kSecondHalf;
  if (name == "all") return ScoreMode::kAll;
  return InvalidArgument("score mode '{}': expected second-half or all", name);
}

Expected<ChunkPlan> PlanChunks(int64_t num_tokens, int64_t ctx, ScoreMode mode) {
  if (ctx < 2) return InvalidArgument("context of {} tokens: need at least 2", ctx);
  if (num_tokens < ctx) {
    return InvalidArgument("{} tokens make no whole chunk of {}: use a longer text or a smaller --ctx", num_tokens,
                           ctx);
  }
  ChunkPlan p;
  p.ctx = ctx;
  p.num_chunks = num_tokens / ctx;
  p.first = mode == ScoreMode::kAll ? 0 : ctx / 2;
  p.last = ctx - 1;
  return p;
}

double TokenNll(std::span<const float> logits, int32_t target) {
  float max = logits[0];
  for (float l : logits) max = std::max(max, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  return std::log(sum) + max - logits[static_cast<size_t>(target)];
}

void NllStats::Add(double nll) {
  ++count_;
  sum_ += nll;
  sum_sq_ += nll * nll;
}

double NllStats::Perplexity() const { return std::exp(mean()); }

double NllStats::PerplexityError() const {
  if (count_ < 2) return 0;
  const double n = static_cast<double>(count_);
  const double mean = sum_ / n;
  const double variance = sum_sq_ / n - mean * mean;
  return variance > 0 ? Perplexity() * std::sqrt(variance / (n - 1)) : 0.0;
}

Expected<PerplexityResult> EvaluatePerplexity(CompiledModel& model, std::span<const int32_t> tokens,
                                              const PerplexityOptions& options,
                                              const PerplexityProgress& progress) {
  KILN_ASSIGN_OR_RETURN(ChunkPlan plan, PlanChunks(static_cast<int64_t>(tokens.size()), options.ctx, options.score));
  if (options.ctx > model.max_model_len()) {
    return OutOfRange("context of {} tokens beyond the model's {} (raise --max-model-len)", options.ctx,
                      model.max_model_len());
  }
  const int64_t vocab = model.config().vocab_size;
  if (options.bos_id >= vocab) return InvalidArgument("BOS id {} outside the vocabulary of {}", options.bos_id, vocab);
  const int64_t pass_tokens = std::min({options.batch_tokens, options.ctx, model.max_batch_tokens()});
  if (pass_tokens <= 0) return InvalidArgument("batch of {} tokens", options.batch_tokens);
  const int64_t num_chunks =
      options.max_chunks > 0 ? std::min(plan.num_chunks, options.max_chunks) : plan.num_chunks;

  const int64_t block_size = model.options().block_size;
  const int64_t blocks = (options.ctx + block_size - 1) / block_size;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Allocate(model.MakeKvLayout(blocks), HostMemory()));
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  const int32_t* tables[1] = {table.data()};

  std::vector<int32_t> chunk(static_cast<size_t>(options.ctx));
  std::vector<int32_t> ids, positions, token_seq, rows;
  std::vector<float> logits(static_cast<size_t>(std::min(pass_tokens, plan.scored_per_chunk()) * vocab));
  PerplexityResult result;
  result.ctx = options.ctx;
  NllStats stats;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < num_chunks; ++c) {
    std::copy_n(tokens.begin() + c * options.ctx, options.ctx, chunk.begin());
    if (options.bos_id >= 0) chunk[0] = options.bos_id;
    for (int64_t p0 = 0; p0 < options.ctx; p0 += pass_tokens) {
      const int64_t p1 = std::min(options.ctx, p0 + pass_tokens);
      ids.assign(chunk.begin() + p0, chunk.begin() + p1);
      positions.clear();
      rows.clear();
      for (int64_t p = p0; p < p1; ++p) {
        positions.push_back(static_cast<int32_t>(p));
        if (p >= plan.first && p < plan.last) rows.push_back(static_cast<int32_t>(p - p0));
      }
      token_seq.assign(ids.size(), 0);
      const int32_t query_start[2] = {0, static_cast<int32_t>(ids.size())};
      const auto seq_len = static_cast<int32_t>(p1);
      ForwardBatch b;
      b.num_tokens = static_cast<int32_t>(ids.size());
      b.token_ids = ids.data();
      b.positions = positions.data();
      b.token_seq = token_seq.data();
      b.num_seqs = 1;
      b.query_start = query_start;
      b.seq_lens = &seq_len;
      b.block_tables = tables;
      b.num_output_rows = static_cast<int32_t>(rows.size());
      b.output_rows = rows.data();
      Status s = model.Forward(b, *cache, rows.empty() ? nullptr : logits.data(), vocab);
      if (!s.ok()) return s.WithContext(fmt::format("chunk {}", c));
      for (size_t r = 0; r < rows.size(); ++r) {
        const int64_t p = p0 + rows[r];
        std::span<const float> row(logits.data() + r * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
        stats.Add(TokenNll(row, chunk[static_cast<size_t>(p + 1)]));
      }
    }
    result.num_chunks = c + 1;
    result.tokens_evaluated += options.ctx;
    result.num_scored = stats.count();
    result.ppl = stats.Perplexity();
    result.ppl_error = stats.PerplexityError();
    result.mean_nll = stats.mean();
    result.chunk_ppl.push_back(result.ppl);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) progress(c + 1, num_chunks, result);
  }
  return result;
}

}  // namespace kiln
