// The sampler against distributions computed here in double with libm:
// greedy choice, draw frequencies at a temperature, truncation by top-k,
// top-p and min-p, masked tokens, seeds and log-probabilities.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

namespace kiln {
namespace sampler_tests {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

SamplingParams WithTemperature(double temperature) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

// softmax(logits / temperature) in double.
std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  const double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - m) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

// Token -> how often `draws` samples from `logits` chose it.
std::map<int32_t, int> Draw(const std::vector<float>& logits, const SamplingParams& params, int draws,
                            uint64_t seed = 7) {
  SamplerState state = MakeSamplerState(params, {}, static_cast<int64_t>(logits.size()), seed);
  std::map<int32_t, int> counts;
  std::vector<float> scratch;
  for (int i = 0; i < draws; ++i) {
    scratch = logits;  // Sample edits its input
    counts[Sample(scratch.data(), static_cast<int64_t>(scratch.size()), params, state).token] += 1;
  }
  return counts;
}

TEST(Sampler, GreedyTakesTheLargestLogitAndTheLowestIdOnTies) {
  SamplingParams greedy = WithTemperature(0);
  SamplerState state = MakeSamplerState(greedy, {}, 5, 1);
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  EXPECT_EQ(Sample(logits.data(), 5, greedy, state).token, 1);
}

// The plain greedy choice: the largest non-NaN value's first id, 0 when
// every value is NaN.
int32_t ReferenceArgmax(const std::vector<float>& x) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : x) m = v > m ? v : m;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == m) return static_cast<int32_t>(i);
  }
  return 0;
}

// Greedy picks per vector lane and chain and merges them: ties spread over
// different lanes, NaNs, infinities and every length up to a few vectors
// (and a vocabulary-sized one with its largest value near the end).
TEST(Sampler, GreedyMatchesThePlainArgmaxOnTiesNaNsAndInfinities) {
  SamplingParams greedy = WithTemperature(0);
  uint64_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(seed >> 33);
  };
  for (int trial = 0; trial < 20000; ++trial) {
    const auto n = static_cast<int64_t>(1 + next() % 70);
    std::vector<float> logits(static_cast<size_t>(n));
    for (float& v : logits) {
      const uint32_t kind = next() % 8;
      v = kind == 0   ? std::numeric_limits<float>::quiet_NaN()
          : kind == 1 ? -std::numeric_limits<float>::infinity()
          : kind == 2 ? std::numeric_limits<float>::infinity()
                      : static_cast<float>(next() % 5);
    }
    const int32_t expected = ReferenceArgmax(logits);
    SamplerState state = MakeSamplerState(greedy, {}, n, 1);
    std::vector<float> scratch = logits;
    ASSERT_EQ(Sample(scratch.data(), n, greedy, state).token, expected) << "trial " << trial << ", n " << n;
  }
  std::vector<float> vocab(151936);
  for (size_t i = 0; i < vocab.size(); ++i) vocab[i] = static_cast<float>(i % 977) * 0.001f;
  vocab[151930] = 3.0f;
  vocab[151933] = 3.0f;
  SamplerState state = MakeSamplerState(greedy, {}, 151936, 1);
  EXPECT_EQ(Sample(vocab.data(), 151936, greedy, state).token, 151930);
}

TEST(Sampler, FrequenciesFollowTheSoftmaxAtTheTemperature) {
  const std::vector<float> logits = {1.0f, 0.0f, -0.5f, 2.0f, 0.3f, -3.0f, 1.5f, 0.7f};
  for (double temperature : {0.6, 1.0, 2.5}) {
    const std::vector<double> expected = Softmax(logits, temperature);
    const int draws = 40000;
    std::map<int32_t, int> counts = Draw(logits, WithTemperature(temperature), draws);
    for (size_t t = 0; t < logits.size(); ++t) {
      const double freq = static_cast<double>(counts[static_cast<int32_t>(t)]) / draws;
      // Five standard deviations of a binomial frequency.
      const double sigma = std::sqrt(expected[t] * (1 - expected[t]) / draws);
      EXPECT_NEAR(freq, expected[t], 5 * sigma + 1e-4) << "token " << t << " at T=" << temperature;
    }
  }
}

TEST(Sampler, AVocabularySizedDistributionIsDrawnFromWhole) {
  // 151936 tokens as Qwen2.5's vocabulary: the chunked draw must reach
  // every part of it, in proportion.
  const int64_t vocab = 151936;
  std::vector<float> logits(static_cast<size_t>(vocab), 0.0f);
  SamplingParams params = WithTemperature(1.0);
  std::map<int32_t, int> counts = Draw(logits, params, 5000);
  int first_half = 0, last_chunk = 0;
  for (const auto& [token, n] : counts) {
    ASSERT_GE(token, 0);
    ASSERT_LT(token, vocab);
    if (token < vocab / 2) first_half += n;
    if (token >= vocab - 1024) last_chunk += n;
  }
  EXPECT_NEAR(first_half / 5000.0, 0.5, 0.03);  // 4 standard deviations
  EXPECT_GT(last_chunk, 0);
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  const int64_t vocab = 151936;
  std::vector<float> logits(static_cast<size_t>(vocab), kMasked);
  // Three allowed tokens, one of them the very last id, the others far
  // apart; very negative but finite logits are allowed too.
  logits[5] = 0.0f;
  logits[80000] = -100.0f;
  logits[vocab - 1] = 0.5f;
  std::map<int32_t, int> counts = Draw(logits, WithTemperature(1.0), 1000);
  for (const auto& [token, n] : counts) {
    EXPECT_TRUE(token == 5 || token == 80000 || token == vocab - 1) << token;
  }
  EXPECT_GT(counts[5], 0);
  EXPECT_GT(counts[static_cast<int32_t>(vocab - 1)], counts[5]);  // e^0.5 against e^0
}

TEST(Sampler, TopKTopPAndMinPKeepOnlyTheirCandidates) {
  const std::vector<float> logits = {3.0f, 2.9f, 0.0f, 2.8f, -1.0f, 1.0f};
  SamplingParams top_k = WithTemperature(1.0);
  top_k.top_k = 2;
  for (const auto& [token, n] : Draw(logits, top_k, 2000)) EXPECT_TRUE(token == 0 || token == 1) << token;

  // p = softmax: tokens 0, 1, 3 hold about 0.34, 0.31, 0.28; top_p 0.5
  // needs the first two.
  SamplingParams top_p = WithTemperature(1.0);
  top_p.top_p = 0.5;
  std::map<int32_t, int> kept = Draw(logits, top_p, 2000);
  EXPECT_EQ(kept.size(), 2u);
  EXPECT_GT(kept[0], 0);
  EXPECT_GT(kept[1], 0);

  // min_p 0.5: tokens at least half as likely as the most likely one
  // (e^-0.69 = 0.5): 0, 1 and 3.
  SamplingParams min_p = WithTemperature(1.0);
  min_p.min_p = 0.5;
  std::map<int32_t, int> above = Draw(logits, min_p, 3000);
  EXPECT_EQ(above.size(), 3u);
  for (const auto& [token, n] : above) EXPECT_TRUE(token == 0 || token == 1 || token == 3) << token;

  SamplingParams one = WithTemperature(1.0);
  one.top_k = 1;
  EXPECT_EQ(Draw(logits, one, 50).size(), 1u);
  EXPECT_EQ(Draw(logits, one, 50).begin()->first, 0);
}

// The processed distribution against softmax in double, renormalized over
// the candidates that truncation keeps; penalties as of the state.
TEST(Sampler, ProcessedDistributionIsWhatSampleDrawsFrom) {
  const std::vector<float> logits = {3.0f, 2.9f, 0.0f, 2.8f, -1.0f, 1.0f};
  auto processed = [&](const SamplingParams& params, const SamplerState& state,
                       const std::vector<uint32_t>* mask = nullptr) {
    std::vector<float> scratch = logits, probs;
    EXPECT_TRUE(ProcessedDistribution(scratch.data(), 6, params, state, mask, &probs));
    return probs;
  };
  auto renormalized = [](std::vector<double> p, const std::vector<int>& keep) {
    double sum = 0;
    for (int i : keep) sum += p[static_cast<size_t>(i)];
    std::vector<double> out(p.size(), 0.0);
    for (int i : keep) out[static_cast<size_t>(i)] = p[static_cast<size_t>(i)] / sum;
    return out;
  };
  auto expect_near = [](const std::vector<float>& actual, const std::vector<double>& expected) {
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 2e-6) << i;
  };
  for (double temperature : {0.5, 1.0, 2.0}) {
    SamplingParams params = WithTemperature(temperature);
    expect_near(processed(params, MakeSamplerState(params, {}, 6, 1)), Softmax(logits, temperature));
  }
  SamplingParams top_k = WithTemperature(1.0);
  top_k.top_k = 2;
  expect_near(processed(top_k, MakeSamplerState(top_k, {}, 6, 1)), renormalized(Softmax(logits, 1.0), {0, 1}));
  SamplingParams min_p = WithTemperature(1.0);
  min_p.min_p = 0.5;
  expect_near(processed(min_p, MakeSamplerState(min_p, {}, 6, 1)), renormalized(Softmax(logits, 1.0), {0, 1, 3}));
  SamplingParams top_p = WithTemperature(1.0);
  top_p.top_p = 0.5;
  expect_near(processed(top_p, MakeSamplerState(top_p, {}, 6, 1)), renormalized(Softmax(logits, 1.0), {0, 1}));

  // A presence penalty of 1 on token 0, once drawn.
  SamplingParams penalized = WithTemperature(1.0);
  penalized.presence_penalty = 1.0;
  SamplerState state = MakeSamplerState(penalized, {}, 6, 1);
  AcceptToken(state, 0);
  std::vector<float> shifted = logits;
  shifted[0] -= 1.0f;
  expect_near(processed(penalized, state), Softmax(shifted, 1.0));

  // Greedy: a point mass at the argmax; a mask applies first.
  SamplingParams greedy = WithTemperature(0);
  expect_near(processed(greedy, MakeSamplerState(greedy, {}, 6, 1)), {1, 0, 0, 0, 0, 0});
  const std::vector<uint32_t> no_zero = {0x3fu & ~1u};
  expect_near(processed(greedy, MakeSamplerState(greedy, {}, 6, 1), &no_zero), {0, 1, 0, 0, 0, 0});
  const std::vector<uint32_t> none = {0u};
  std::vector<float> scratch = logits, probs;
  SamplerState plain = MakeSamplerState(greedy, {}, 6, 1);
  EXPECT_FALSE(ProcessedDistribution(scratch.data(), 6, greedy, plain, &none, &probs));
}

TEST(Sampler, DrawFromWeightsFollowsTheWeights) {
  Rng rng(3);
  const std::vector<float> weights = {0.0f, 3.0f, -1.0f, 1.0f};
  std::map<int32_t, int> counts;
  for (int i = 0; i < 40000; ++i) counts[DrawFromWeights(weights, rng)] += 1;
  EXPECT_EQ(counts.size(), 2u);  // never a zero or negative weight
  EXPECT_NEAR(counts[1] / 40000.0, 0.75, 0.01);
  EXPECT_EQ(DrawFromWeights(std::vector<float>{0.0f, -2.0f}, rng), -1);
}

TEST(Sampler, ASeedRepeatsItsTokensAndAnotherSeedDoesNot) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(0.1 * static_cast<double>(i)));
  SamplingParams params = WithTemperature(0.8);
  auto run = [&](uint64_t seed) {
    SamplerState state = MakeSamplerState(params, {}, 1000, seed);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 32; ++i) {
      std::vector<float> scratch = logits;
      tokens.push_back(Sample(scratch.data(), 1000, params, state).token);
    }
    return tokens;
  };
  EXPECT_EQ(run(11), run(11));
  EXPECT_NE(run(11), run(12));
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, -0.5f, 2.0f};
  SamplingParams params = WithTemperature(0.5);
  params.logprobs = true;
  params.top_logprobs = 2;
  const std::vector<double> p = Softmax(logits, 1.0);  // before the temperature
  SamplerState state = MakeSamplerState(params, {}, 4, 3);
  std::vector<float> scratch = logits;
  SampleResult r = Sample(scratch.data(), 4, params, state);
  ASSERT_GE(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(p[static_cast<size_t>(r.token)]), 1e-5);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].token, 3);
  EXPECT_EQ(r.top[1].token, 0);
  EXPECT_NEAR(r.top[0].logprob, std::log(p[3]), 1e-5);
}

}  // namespace sampler_tests
}  // namespace kiln
