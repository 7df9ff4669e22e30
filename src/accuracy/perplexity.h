// Perplexity of a compiled model on a token stream, by default with the
// method of llama.cpp's perplexity tool (the figure most users compare
// against): non-overlapping chunks of `ctx` tokens, each evaluated alone from
// an empty cache, its first token replaced by BOS where the model adds one,
// and only the second half of each chunk scored.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

class ModelSession;

enum class ScoreMode {
  kSecondHalf,  // logits at ctx/2 .. ctx-2 predict tokens ctx/2+1 .. ctx-1 (llama.cpp)
  kAll,         // logits at 0 .. ctx-2 predict tokens 1 .. ctx-1
};

const char* ScoreModeName(ScoreMode mode);  // "second-half", "all"
Expected<ScoreMode> ParseScoreMode(std::string_view name);

// Which positions of a chunk are scored: logits at [first, last) predict
// the token one further on.
struct ChunkPlan {
  int64_t ctx = 0;
  int64_t num_chunks = 0;  // floor(tokens / ctx); the rest is not evaluated
  int64_t first = 0;
  int64_t last = 0;

  int64_t scored_per_chunk() const { return last - first; }
};

// The plan for `num_tokens` tokens. Fails when ctx < 2 or fewer than ctx
// tokens are given (no whole chunk).
Expected<ChunkPlan> PlanChunks(int64_t num_tokens, int64_t ctx, ScoreMode mode);

// Natural-log negative log-likelihood of `target` under softmax(logits),
// computed in double: log(sum exp(l - max)) + max - l[target].
// REQUIRES: 0 <= target < logits.size().
double TokenNll(std::span<const float> logits, int32_t target);

// Running sums of per-token NLLs, and the perplexity with llama.cpp's
// +/- estimate: ppl * sqrt((mean(nll^2) - mean(nll)^2) / (n - 1)).
class NllStats {
 public:
  void Add(double nll);
  int64_t count() const { return count_; }
  double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  double Perplexity() const;
  // 0 with fewer than two values.
  double PerplexityError() const;

 private:
  int64_t count_ = 0;
  double sum_ = 0;
  double sum_sq_ = 0;
};

struct PerplexityOptions {
  int64_t ctx = 512;
  ScoreMode score = ScoreMode::kSecondHalf;
  int32_t bos_id = -1;          // >= 0: replaces each chunk's first token
  int64_t max_chunks = 0;       // 0: every whole chunk
};

struct PerplexityResult {
  double ppl = 0;
  double ppl_error = 0;      // llama.cpp's +/- estimate
  double mean_nll = 0;
  int64_t num_chunks = 0;
  int64_t ctx = 0;
  int64_t num_scored = 0;    // predictions scored
  int64_t tokens_evaluated = 0;  // tokens run through the model
  double seconds = 0;
  std::vector<double> chunk_ppl;  // running perplexity after each chunk
};

// Called after each chunk: chunks done, chunks in all, the running result.
using PerplexityProgress = std::function<void(int64_t done, int64_t total, const PerplexityResult& so_far)>;

// Evaluates `tokens` chunk by chunk on `session`, one sequence at a time
// from the start of its KV cache, in forward passes of at most the
// session's max_batch_tokens() tokens whose logits are computed only at the
// scored positions. Fails on a bad plan, a context beyond the model's or
// the session's KV cache, or a failed pass.
Expected<PerplexityResult> EvaluatePerplexity(ModelSession& session, std::span<const int32_t> tokens,
                                              const PerplexityOptions& options,
                                              const PerplexityProgress& progress = nullptr);

}  // namespace kiln
