// Chunked perplexity evaluation on a compiled model.
#include "accuracy/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/model_session.h"
#include "format/model_config.h"

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

Expected<PerplexityResult> EvaluatePerplexity(ModelSession& session, std::span<const int32_t> tokens,
                                              const PerplexityOptions& options,
                                              const PerplexityProgress& progress) {
  KILN_ASSIGN_OR_RETURN(ChunkPlan plan, PlanChunks(static_cast<int64_t>(tokens.size()), options.ctx, options.score));
  if (options.ctx > session.max_model_len()) {
    return OutOfRange("context of {} tokens beyond the model's {} (raise --max-model-len)", options.ctx,
                      session.max_model_len());
  }
  const int64_t kv_tokens = session.num_kv_blocks() * session.block_size();
  if (options.ctx > kv_tokens) {
    return OutOfRange("context of {} tokens beyond the session's KV cache of {} tokens", options.ctx,
                      kv_tokens);
  }
  const int64_t vocab = session.config().vocab_size;
  if (options.bos_id >= vocab) return InvalidArgument("BOS id {} outside the vocabulary of {}", options.bos_id, vocab);
  const int64_t pass_tokens = std::min(options.ctx, session.max_batch_tokens());
  const int64_t num_chunks =
      options.max_chunks > 0 ? std::min(plan.num_chunks, options.max_chunks) : plan.num_chunks;

  std::vector<int32_t> chunk(static_cast<size_t>(options.ctx));
  std::vector<int32_t> rows;
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
      rows.clear();
      for (int64_t p = p0; p < p1; ++p) {
        if (p >= plan.first && p < plan.last) rows.push_back(static_cast<int32_t>(p - p0));
      }
      const std::span<const int32_t> ids(chunk.data() + p0, static_cast<size_t>(p1 - p0));
      Status s = session.ForwardSequence(ids, static_cast<int32_t>(p0), rows,
                                         rows.empty() ? nullptr : logits.data());
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
