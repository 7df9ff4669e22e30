// Perplexity: the chunk plan of llama.cpp's method and of --score all, the
// NLL and +/- arithmetic, and EvaluatePerplexity against NLLs computed from
// a plain full-logits prefill of each chunk.
#include "accuracy/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "compiler/compiled_model.h"
#include "engine/model_session.h"
#include "format/weight_store.h"
#include "testing/model_runner_for_tests.h"
#include "testing/test_paths.h"

namespace kiln {
namespace perplexity_tests {

TEST(PlanChunks, SecondHalfIsLlamaCppsMethod) {
  auto p = PlanChunks(44558, 256, ScoreMode::kSecondHalf);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_chunks, 174);  // tiny-llama's heldout.txt in goldens.json
  EXPECT_EQ(p->first, 128);
  EXPECT_EQ(p->last, 255);
  EXPECT_EQ(p->scored_per_chunk() * p->num_chunks, 22098);
  auto qwen = PlanChunks(42239, 256, ScoreMode::kSecondHalf);
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->num_chunks * qwen->scored_per_chunk(), 20828);
  auto all = PlanChunks(1000, 10, ScoreMode::kAll);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->first, 0);
  EXPECT_EQ(all->scored_per_chunk(), 9);
  auto odd = PlanChunks(7, 7, ScoreMode::kSecondHalf);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->first, 3);
  EXPECT_EQ(odd->scored_per_chunk(), 3);
  EXPECT_FALSE(PlanChunks(255, 256, ScoreMode::kSecondHalf).ok());
  EXPECT_FALSE(PlanChunks(100, 1, ScoreMode::kAll).ok());
  EXPECT_TRUE(ParseScoreMode("all").ok());
  EXPECT_FALSE(ParseScoreMode("half").ok());
}

TEST(TokenNll, IsTheNegativeLogSoftmax) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, -1.0f};
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(TokenNll(logits, t), std::log(z) - logits[t], 1e-12);
  // Large logits do not overflow.
  std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(TokenNll(big, 1), std::log(2.0), 1e-12);
}

TEST(NllStats, PerplexityAndLlamaCppsErrorEstimate) {
  NllStats s;
  EXPECT_EQ(s.PerplexityError(), 0);
  const std::vector<double> nll = {2.0, 3.0, 4.5, 1.5, 3.25};
  double sum = 0, sq = 0;
  for (double v : nll) {
    s.Add(v);
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(nll.size()), mean = sum / n;
  EXPECT_EQ(s.count(), 5);
  EXPECT_NEAR(s.Perplexity(), std::exp(mean), 1e-12);
  EXPECT_NEAR(s.PerplexityError(), std::exp(mean) * std::sqrt((sq / n - mean * mean) / (n - 1)), 1e-12);
}

// The evaluation against an independent path: the DirectRunner's logits of
// every position of each chunk (BOS replaced by hand), scored here.
TEST(EvaluatePerplexity, EqualsNllsFromAFullPrefillOfEachChunk) {
  auto weights = WeightStore::Open(testing::ModelDir("tiny-qwen2"));
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  ModelSessionOptions o;
  o.precision = Precision::kFp32;
  o.threads = 2;
  o.max_seqs = 1;
  o.max_batch_tokens = 16;  // chunks of 40 take three passes
  o.kv_tokens_per_seq = 40;
  auto session = ModelSession::Create(**weights, o);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  CompiledModel* model = &(*session)->model();
  std::vector<int32_t> tokens;
  for (int i = 0; i < 130; ++i) tokens.push_back((i * 131 + 7) % 2000 + 5);
  const int32_t bos = 3;
  for (ScoreMode mode : {ScoreMode::kSecondHalf, ScoreMode::kAll}) {
    PerplexityOptions po;
    po.ctx = 40;
    po.score = mode;
    po.bos_id = bos;
    int64_t calls = 0;
    auto r = EvaluatePerplexity(**session, tokens, po, [&](int64_t done, int64_t total, const PerplexityResult&) {
      EXPECT_EQ(done, ++calls);
      EXPECT_EQ(total, 3);
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->num_chunks, 3);
    EXPECT_EQ(r->tokens_evaluated, 120);
    EXPECT_EQ(calls, 3);

    NllStats expected;
    testing::DirectRunner runner(*model, 1, 64);
    const int64_t vocab = model->config().vocab_size;
    for (int c = 0; c < 3; ++c) {
      std::vector<int32_t> chunk(tokens.begin() + c * 40, tokens.begin() + (c + 1) * 40);
      chunk[0] = bos;
      auto logits = runner.Prefill({chunk}, 16, true)[0];
      for (int p = mode == ScoreMode::kAll ? 0 : 20; p < 39; ++p) {
        std::span<const float> row(logits.data() + p * vocab, static_cast<size_t>(vocab));
        expected.Add(TokenNll(row, chunk[static_cast<size_t>(p + 1)]));
      }
    }
    EXPECT_EQ(r->num_scored, expected.count());
    EXPECT_NEAR(r->ppl, expected.Perplexity(), 1e-9 * expected.Perplexity());
    EXPECT_NEAR(r->ppl_error, expected.PerplexityError(), 1e-9);
    EXPECT_GT(r->ppl, 1.0);
  }
  PerplexityOptions too_long;
  too_long.ctx = 4096;
  std::vector<int32_t> many(5000, 5);
  EXPECT_FALSE(EvaluatePerplexity(**session, many, too_long).ok());
}

}  // namespace perplexity_tests
}  // namespace kiln
