// Sampling with speculative decoding keeps plain decoding's distribution.
// A synthetic model (each prefix's logits made up from its hash) is decoded
// token by token and with drafts verified by VerifyDraft, under penalties,
// a temperature and top-k/top-p/min-p: the joint frequencies of the first
// output tokens must pass Pearson's chi-squared homogeneity test at alpha =
// 0.001 over 20,000 draws each, with point-mass drafts (prompt lookup) and
// with drafts drawn from a proposer's own distribution q. Two wrong
// verifiers (accepting every draft token; drawing a rejected position from
// p instead of the residual) must fail the same test, so that it can fail.
// Then the same on a shared tiny model through the engine, with n-gram drafts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "chi_squared.h"
#include "engine/draft_verifier.h"
#include "engine/sampler.h"
#include "engine_test_util.h"

namespace kiln {
namespace rejection_sampling_tests {

using stats_test::ChiSquared;
using stats_test::Homogeneity;

constexpr int64_t kVocab = 6;
constexpr int kPositions = 3;  // output tokens compared, jointly
constexpr int kDraftTokens = 3;
constexpr int kDraws = 20000;
constexpr double kAlpha = 0.001;

// The synthetic model: logits in [-2, 2) from a hash of the whole prefix,
// with token 0 favoured so that distributions are uneven.
std::vector<float> ModelLogits(std::span<const int32_t> prefix) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int32_t t : prefix) h = (h ^ static_cast<uint64_t>(t + 1)) * 0xbf58476d1ce4e5b9ull;
  std::mt19937_64 gen(h);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = std::uniform_real_distribution<float>(-2.0f, 2.0f)(gen);
  logits[0] += 1.0f;
  return logits;
}

SamplingParams Params() {
  SamplingParams p;
  p.temperature = 0.9;
  p.top_k = 5;
  p.top_p = 0.97;
  p.min_p = 0.02;
  p.presence_penalty = 0.4;
  p.frequency_penalty = 0.3;
  p.repetition_penalty = 1.2;
  return p;
}

const std::vector<int32_t> kPrompt = {1, 2, 4};

int32_t Key(const std::vector<int32_t>& out) {
  int32_t key = 0;
  for (int i = 0; i < kPositions; ++i) key = key * static_cast<int32_t>(kVocab) + out[static_cast<size_t>(i)];
  return key;
}

// Plain decoding: one Sample per token.
std::map<int32_t, int64_t> DecodePlainly(uint64_t first_seed) {
  const SamplingParams params = Params();
  std::map<int32_t, int64_t> counts;
  for (int d = 0; d < kDraws; ++d) {
    SamplerState state = MakeSamplerState(params, kPrompt, kVocab, first_seed + static_cast<uint64_t>(d));
    std::vector<int32_t> prefix = kPrompt, out;
    while (out.size() < kPositions) {
      std::vector<float> logits = ModelLogits(prefix);
      const int32_t token = Sample(logits.data(), kVocab, params, state).token;
      AcceptToken(state, token);
      prefix.push_back(token);
      out.push_back(token);
    }
    counts[Key(out)] += 1;
  }
  return counts;
}

// A draft for `prefix`: its tokens and, for a proposer with a distribution,
// q at each position.
struct Draft {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> probs;
};

// Prompt lookup's stand-in: the raw logits' argmax, a certainty (q a point
// mass); a good guess, often but not always accepted.
Draft PointMassDraft(const std::vector<int32_t>& prefix, std::mt19937_64&) {
  Draft draft;
  std::vector<int32_t> context = prefix;
  for (int i = 0; i < kDraftTokens; ++i) {
    std::vector<float> logits = ModelLogits(context);
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    draft.tokens.push_back(best);
    context.push_back(best);
  }
  return draft;
}

// A draft model's stand-in: q = softmax of the model's logits with noise
// (its own hash), each token drawn from q.
Draft DistributionDraft(const std::vector<int32_t>& prefix, std::mt19937_64& gen) {
  Draft draft;
  std::vector<int32_t> context = prefix;
  for (int i = 0; i < kDraftTokens; ++i) {
    std::vector<float> logits = ModelLogits(context);
    std::vector<int32_t> shifted = context;
    shifted.push_back(99);
    const std::vector<float> noise = ModelLogits(shifted);
    std::vector<float> q(kVocab);
    double sum = 0;
    for (int64_t v = 0; v < kVocab; ++v)
      sum += q[static_cast<size_t>(v)] = std::exp(logits[v] + 0.7f * noise[v]);
    for (float& x : q) x = static_cast<float>(x / sum);
    const auto token = static_cast<int32_t>(std::discrete_distribution<int32_t>(q.begin(), q.end())(gen));
    draft.tokens.push_back(token);
    draft.probs.push_back(q);
    context.push_back(token);
  }
  return draft;
}

using Proposer = std::function<Draft(const std::vector<int32_t>&, std::mt19937_64&)>;
using Verifier =
    std::function<std::vector<SampleResult>(float*, const Draft&, const SamplingParams&, SamplerState&)>;

std::vector<SampleResult> RightVerifier(float* rows, const Draft& draft, const SamplingParams& params,
                                        SamplerState& state) {
  DraftContext context;
  context.probs = draft.probs;
  return VerifyDraft(rows, kVocab, draft.tokens, context, params, state);
}

// Decoding with drafts: each round verifies a draft against the rows the
// model gives for the prefix and each draft token after it.
std::map<int32_t, int64_t> DecodeWithDrafts(uint64_t first_seed, const Proposer& propose,
                                            const Verifier& verify, double* accepted_per_pass = nullptr) {
  const SamplingParams params = Params();
  std::map<int32_t, int64_t> counts;
  std::mt19937_64 proposer_gen(first_seed ^ 0x5eed);
  int64_t passes = 0, accepted = 0;
  for (int d = 0; d < kDraws; ++d) {
    SamplerState state = MakeSamplerState(params, kPrompt, kVocab, first_seed + static_cast<uint64_t>(d));
    std::vector<int32_t> prefix = kPrompt, out;
    while (out.size() < kPositions) {
      const Draft draft = propose(prefix, proposer_gen);
      std::vector<float> rows;
      std::vector<int32_t> context = prefix;
      for (size_t i = 0; i <= draft.tokens.size(); ++i) {
        const std::vector<float> row = ModelLogits(context);
        rows.insert(rows.end(), row.begin(), row.end());
        if (i < draft.tokens.size()) context.push_back(draft.tokens[i]);
      }
      const std::vector<SampleResult> drawn = verify(rows.data(), draft, params, state);
      ++passes;
      accepted += static_cast<int64_t>(drawn.size()) - 1;
      for (const SampleResult& r : drawn) {
        prefix.push_back(r.token);
        out.push_back(r.token);
      }
    }
    counts[Key(out)] += 1;
  }
  if (accepted_per_pass != nullptr)
    *accepted_per_pass = static_cast<double>(accepted) / static_cast<double>(passes);
  return counts;
}

std::string Describe(const ChiSquared& c) {
  return "chi-squared " + std::to_string(c.statistic) + " with " + std::to_string(c.df) +
         " degrees of freedom, p = " + std::to_string(c.p_value);
}

TEST(ChiSquaredTest, PValuesMatchKnownQuantiles) {
  // The 0.999 quantiles of chi-squared with 1 and 10 degrees of freedom,
  // and with 2 (an exponential: P(X >= x) = e^(-x / 2)).
  EXPECT_NEAR(stats_test::ChiSquaredPValue(10.828, 1), 0.001, 2e-6);
  EXPECT_NEAR(stats_test::ChiSquaredPValue(29.588, 10), 0.001, 2e-6);
  EXPECT_NEAR(stats_test::ChiSquaredPValue(13.0, 2), std::exp(-6.5), 1e-12);
  EXPECT_NEAR(stats_test::ChiSquaredPValue(100.0, 50), 3.6e-5, 0.5e-5);
  EXPECT_NEAR(stats_test::ChiSquaredPValue(1.0, 30), 1.0, 1e-9);
}

TEST(RejectionSamplingTest, PointMassDraftsKeepPlainDecodingsDistribution) {
  const auto plain = DecodePlainly(1);
  double accepted_per_pass = 0;
  const auto drafted = DecodeWithDrafts(1'000'001, PointMassDraft, RightVerifier, &accepted_per_pass);
  const ChiSquared c = Homogeneity(plain, drafted);
  EXPECT_GT(c.df, 30);
  EXPECT_GT(c.p_value, kAlpha) << Describe(c);
  // Drafts were accepted often and rejected often: both paths ran.
  EXPECT_GT(accepted_per_pass, 0.5);
  EXPECT_LT(accepted_per_pass, 2.5);
}

TEST(RejectionSamplingTest, DraftsFromAProposersDistributionKeepPlainDecodingsDistribution) {
  const auto plain = DecodePlainly(2'000'001);
  double accepted_per_pass = 0;
  const auto drafted = DecodeWithDrafts(3'000'001, DistributionDraft, RightVerifier, &accepted_per_pass);
  const ChiSquared c = Homogeneity(plain, drafted);
  EXPECT_GT(c.df, 30);
  EXPECT_GT(c.p_value, kAlpha) << Describe(c);
  EXPECT_GT(accepted_per_pass, 0.3);
  EXPECT_LT(accepted_per_pass, 2.5);
}

// Wrong: every draft token kept, then one token from the last row.
std::vector<SampleResult> AlwaysAccept(float* rows, const Draft& draft, const SamplingParams& params,
                                       SamplerState& state) {
  std::vector<SampleResult> drawn;
  for (int32_t t : draft.tokens) {
    SampleResult r;
    r.token = t;
    AcceptToken(state, t);
    drawn.push_back(r);
  }
  drawn.push_back(Sample(rows + draft.tokens.size() * kVocab, kVocab, params, state));
  AcceptToken(state, drawn.back().token);
  return drawn;
}

// Wrong: accepted with probability p(x) as it should be, but a rejected
// position drawn from p (x included) instead of the residual.
std::vector<SampleResult> ResampleFromP(float* rows, const Draft& draft, const SamplingParams& params,
                                        SamplerState& state) {
  std::vector<SampleResult> drawn;
  std::vector<float> p;
  for (size_t i = 0; i <= draft.tokens.size(); ++i) {
    EXPECT_TRUE(ProcessedDistribution(rows + i * kVocab, kVocab, params, state, nullptr, &p));
    SampleResult r;
    const bool last = i == draft.tokens.size();
    const bool accept = !last && state.rng.Uniform() < p[static_cast<size_t>(draft.tokens[i])];
    r.token = accept ? draft.tokens[i] : DrawFromWeights(p, state.rng);
    AcceptToken(state, r.token);
    drawn.push_back(r);
    if (!accept) break;
  }
  return drawn;
}

TEST(RejectionSamplingTest, WrongVerifiersFailTheSameTest) {
  const auto plain = DecodePlainly(4'000'001);
  const ChiSquared always = Homogeneity(plain, DecodeWithDrafts(5'000'001, PointMassDraft, AlwaysAccept));
  EXPECT_LT(always.p_value, kAlpha) << Describe(always);
  const ChiSquared from_p = Homogeneity(plain, DecodeWithDrafts(6'000'001, PointMassDraft, ResampleFromP));
  EXPECT_LT(from_p.p_value, kAlpha) << Describe(from_p);
}

TEST(RejectionSamplingTest, GreedyAcceptsTheDraftOnlyWhereTheModelAgrees) {
  // Temperature 0: a q that puts the draft token anywhere changes nothing.
  SamplingParams params;
  params.temperature = 0;
  std::vector<float> rows(3 * kVocab, 0.0f);
  rows[0 * kVocab + 2] = 3.0f;
  rows[1 * kVocab + 4] = 3.0f;
  rows[2 * kVocab + 1] = 3.0f;
  const std::vector<int32_t> draft = {2, 5};
  const std::vector<std::vector<float>> q(2, std::vector<float>(kVocab, 1.0f / kVocab));
  DraftContext context;
  context.probs = q;
  SamplerState state = MakeSamplerState(params, {}, kVocab, 1);
  std::vector<SampleResult> drawn = VerifyDraft(rows.data(), kVocab, draft, context, params, state);
  ASSERT_EQ(drawn.size(), 2u);
  EXPECT_EQ(drawn[0].token, 2);
  EXPECT_EQ(drawn[1].token, 4);
}

// Through the engine on a shared tiny model with n-gram drafts: seeded
// requests whose prompt is a passage, the model's own greedy continuation
// of it, and the passage again (so that prompt lookup drafts what the model
// is likely to say next), 20,000 with speculation and 20,000 without
// (other seeds), their first three tokens compared jointly.
TEST(RejectionSamplingTest, EngineSampledOutputKeepsItsDistributionWithNgramDrafts) {
  const std::string model = "tiny-qwen2";
  EngineOptions options = engine_test::TinyOptions(model);
  options.max_num_seqs = 512;
  options.max_num_batched_tokens = 4096;
  options.block_size = 4;  // the prefix cache then holds all but the prompt's last few tokens
  options.max_model_len = 96;  // a KV cache for 512 short sequences, not 512 full-length ones
  LoadedModel loaded = engine_test::LoadOrDie(options);
  const std::vector<int32_t> text = engine_test::HeldoutIds(model);
  const std::vector<int32_t> passage(text.begin() + 300, text.begin() + 324);
  auto greedy = engine_test::EngineOrDie(loaded, options)->Generate({engine_test::GreedyIds(passage, 16)});
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  std::vector<int32_t> prompt = passage;
  prompt.insert(prompt.end(), (*greedy)[0].output_ids.begin(), (*greedy)[0].output_ids.end());
  prompt.insert(prompt.end(), passage.begin(), passage.end());

  auto run = [&](bool speculate, uint64_t first_seed, EngineCounters* counters) {
    EngineOptions o = options;
    if (speculate) {
      o.spec_method = "ngram";
      o.spec_tokens = 3;
      o.spec_adaptive = false;  // every sequence drafts
      o.spec_max_batch = 0;     // every step speculates, however many sequences decode
    }
    auto engine = engine_test::EngineOrDie(loaded, o);
    std::map<int32_t, int64_t> counts;
    std::vector<GenerationRequest> requests;
    for (int d = 0; d < kDraws; ++d) {
      GenerationRequest r;
      r.prompt_ids = prompt;
      r.params.temperature = 0.8;
      r.params.top_k = 8;
      r.params.presence_penalty = 0.3;
      r.params.max_tokens = kPositions + 1;  // room for drafts of 2 tokens after the first
      r.params.ignore_eos = true;
      r.params.seed = first_seed + static_cast<uint64_t>(d);
      requests.push_back(std::move(r));
    }
    auto results = engine->Generate(requests);
    EXPECT_TRUE(results.ok()) << results.status().ToString();
    if (!results.ok()) return counts;
    for (const GenerationResult& r : *results) {
      EXPECT_EQ(r.output_ids.size(), static_cast<size_t>(kPositions + 1));
      if (r.output_ids.size() <= kPositions) continue;
      int64_t key = 0;
      for (int i = 0; i < kPositions; ++i) key = key * 1'000'003 + r.output_ids[static_cast<size_t>(i)];
      counts[static_cast<int32_t>(key % 2'147'483'647)] += 1;
    }
    *counters = engine->Counters();
    return counts;
  };
  EngineCounters plain_counters, spec_counters;
  const auto plain = run(false, 1, &plain_counters);
  const auto drafted = run(true, 1'000'001, &spec_counters);
  EXPECT_EQ(plain_counters.spec_verifications, 0);
  // Most sequences verified a draft, and drafts were both kept and refused.
  EXPECT_GT(spec_counters.spec_verifications, kDraws / 5);
  EXPECT_GT(spec_counters.spec_accepted_tokens, 0);
  EXPECT_LT(spec_counters.spec_accepted_tokens, spec_counters.spec_draft_tokens);
  const ChiSquared c = Homogeneity(plain, drafted);
  std::printf("%lld verifications, %lld of %lld draft tokens accepted; %s\n",
              static_cast<long long>(spec_counters.spec_verifications),
              static_cast<long long>(spec_counters.spec_accepted_tokens),
              static_cast<long long>(spec_counters.spec_draft_tokens), Describe(c).c_str());
  EXPECT_GT(c.df, 5);
  EXPECT_GT(c.p_value, kAlpha) << Describe(c);
}

}  // namespace rejection_sampling_tests
}  // namespace kiln
