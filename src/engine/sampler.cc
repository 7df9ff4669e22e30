// Sampling.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kiln {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

int32_t Argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;  // strict: the lowest id wins ties
  }
  return static_cast<int32_t>(best);
}

// log-softmax normaliser: max + log(sum(exp(x - max))), in double.
double LogSumExp(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  if (!std::isfinite(m)) return m;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i] - m));
  return m + std::log(sum);
}

std::vector<TokenLogprob> TopLogprobs(const float* x, int64_t n, int32_t k, double lse) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  k = static_cast<int32_t>(std::min<int64_t>(k, n));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return x[a] != x[b] ? x[a] > x[b] : a < b;
  });
  std::vector<TokenLogprob> top;
  for (int32_t i = 0; i < k; ++i) {
    top.push_back({ids[static_cast<size_t>(i)], static_cast<float>(x[ids[static_cast<size_t>(i)]] - lse)});
  }
  return top;
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix64(seed);
}

uint64_t Rng::Next() {
  uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

SamplerState MakeSamplerState(const SamplingParams& params, const std::vector<int32_t>& prompt, int64_t vocab_size,
                              uint64_t fallback_seed) {
  SamplerState s{Rng(params.seed.value_or(fallback_seed)), {}, {}};
  if (params.repetition_penalty != 1.0) {
    s.seen.assign(static_cast<size_t>(vocab_size), 0);
    for (int32_t t : prompt) {
      if (t >= 0 && t < vocab_size) s.seen[static_cast<size_t>(t)] = 1;
    }
  }
  return s;
}

void AcceptToken(SamplerState& state, int32_t token) {
  state.output_counts[token] += 1;
  if (!state.seen.empty() && token >= 0 && static_cast<size_t>(token) < state.seen.size()) {
    state.seen[static_cast<size_t>(token)] = 1;
  }
}

SampleResult Sample(float* logits, int64_t vocab, const SamplingParams& params, SamplerState& state) {
  SampleResult result;
  // Log-probabilities of the raw distribution first: the steps below edit
  // the logits in place.
  const bool want_logprobs = params.logprobs || params.top_logprobs > 0;
  double lse = 0;
  std::vector<float> raw;
  if (want_logprobs) {
    lse = LogSumExp(logits, vocab);
    if (params.top_logprobs > 0) result.top = TopLogprobs(logits, vocab, params.top_logprobs, lse);
    raw.assign(logits, logits + vocab);
  }
  auto finish = [&](int32_t token) {
    result.token = token;
    if (want_logprobs) result.logprob = static_cast<float>(raw[static_cast<size_t>(token)] - lse);
    return result;
  };

  // Penalties.
  if (params.repetition_penalty != 1.0 && !state.seen.empty()) {
    auto rp = static_cast<float>(params.repetition_penalty);
    for (int64_t i = 0; i < vocab; ++i) {
      if (!state.seen[static_cast<size_t>(i)]) continue;
      logits[i] = logits[i] > 0 ? logits[i] / rp : logits[i] * rp;
    }
  }
  if (params.presence_penalty != 0 || params.frequency_penalty != 0) {
    for (const auto& [token, count] : state.output_counts) {
      if (token < 0 || token >= vocab) continue;
      logits[token] -= static_cast<float>(params.presence_penalty + params.frequency_penalty * count);
    }
  }

  if (params.temperature == 0) {
    return finish(Argmax(logits, vocab));
  }

  // Probabilities at temperature T, in double.
  std::vector<double> p(static_cast<size_t>(vocab));
  float m = logits[Argmax(logits, vocab)];
  double inv_t = 1.0 / params.temperature;
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    double e = std::exp((static_cast<double>(logits[i]) - m) * inv_t);
    p[static_cast<size_t>(i)] = e;
    sum += e;
  }
  for (double& x : p) x /= sum;

  // Candidates in descending probability (ties by id), truncated by top-k,
  // min-p and top-p. Only as many as needed are sorted.
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  auto by_prob = [&](int32_t a, int32_t b) {
    return p[static_cast<size_t>(a)] != p[static_cast<size_t>(b)] ? p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]
                                                                  : a < b;
  };
  int64_t keep = vocab;
  if (params.top_k > 0) keep = std::min<int64_t>(keep, params.top_k);
  if (params.min_p > 0) {
    double cutoff = params.min_p * p[static_cast<size_t>(Argmax(logits, vocab))];
    int64_t above = 0;
    for (double x : p) above += x >= cutoff ? 1 : 0;
    keep = std::min(keep, std::max<int64_t>(above, 1));
  }
  if (params.top_p < 1.0) {
    // Grow the sorted prefix until it holds top_p of the mass.
    int64_t k = std::min<int64_t>(keep, 64);
    while (true) {
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), by_prob);
      double cum = 0;
      int64_t need = -1;
      for (int64_t i = 0; i < k; ++i) {
        cum += p[static_cast<size_t>(ids[static_cast<size_t>(i)])];
        if (cum >= params.top_p) {
          need = i + 1;
          break;
        }
      }
      if (need > 0) {
        keep = std::min(keep, need);
        break;
      }
      if (k >= keep) break;
      k = std::min(keep, k * 4);
    }
  } else if (keep < vocab) {
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), by_prob);
  }

  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[static_cast<size_t>(ids[static_cast<size_t>(i)])];
  double r = state.rng.Uniform() * total;
  int32_t chosen = ids[static_cast<size_t>(keep - 1)];
  double acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    int32_t id = ids[static_cast<size_t>(i)];
    acc += p[static_cast<size_t>(id)];
    if (r < acc) {
      chosen = id;
      break;
    }
  }
  return finish(chosen);
}

}  // namespace kiln
