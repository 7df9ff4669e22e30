// Sampling.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

// The loops over the whole vocabulary, compiled also for AVX2 and AVX-512
// and picked at load time. Plain float arithmetic in a fixed order, and no
// fused multiply-adds (-ffp-contract=off, src/CMakeLists.txt): every copy
// gives the same bits, so a seed draws the same tokens on every machine.
#if defined(__x86_64__) && defined(__GNUC__)
#define KILN_VOCAB_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_VOCAB_LOOP
#endif

// Vectors of 4 lanes in 2 independent chains: GCC lowers a vector wider
// than the target's registers lane by lane (16 lanes under the AVX2 clone
// took 190 us over a 152k vocabulary, 4 x 2 take 9), and 4 lanes fit every
// clone's registers. Max and equality are exact, so the lane count changes
// no result.
constexpr int kLanes = 4;
constexpr int kChains = 2;
constexpr int kStep = kLanes * kChains;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t LaneIds __attribute__((vector_size(kLanes * sizeof(int32_t))));

// The largest value, NaNs never being it; -inf when there is none.
KILN_VOCAB_LOOP float MaxOf(const float* x, int64_t n) {
  Lanes lane[kChains];
  for (Lanes& l : lane) l = Lanes{} - std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    for (int c = 0; c < kChains; ++c) {
      Lanes v;
      std::memcpy(&v, x + i + c * kLanes, sizeof(v));
      lane[c] = v > lane[c] ? v : lane[c];
    }
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (const Lanes& l : lane) {
    for (int j = 0; j < kLanes; ++j) m = l[j] > m ? l[j] : m;
  }
  return m;
}

// The lowest id among the largest values (0 when all are NaN), in one pass:
// each lane keeps its largest value and where it first saw it (a later
// equal value does not replace it), then the lanes' winners are merged.
KILN_VOCAB_LOOP int32_t Argmax(const float* x, int64_t n) {
  Lanes best[kChains];
  LaneIds at[kChains];
  LaneIds ids[kChains];
  for (int c = 0; c < kChains; ++c) {
    best[c] = Lanes{} - std::numeric_limits<float>::infinity();
    at[c] = LaneIds{} - 1;
    for (int j = 0; j < kLanes; ++j) ids[c][j] = c * kLanes + j;
  }
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    for (int c = 0; c < kChains; ++c) {
      Lanes v;
      std::memcpy(&v, x + i + c * kLanes, sizeof(v));
      const LaneIds greater = v > best[c];
      best[c] = greater ? v : best[c];
      at[c] = greater ? ids[c] : at[c];
      ids[c] += kStep;
    }
  }
  float m = -std::numeric_limits<float>::infinity();
  int64_t where = -1;
  for (int c = 0; c < kChains; ++c) {
    for (int j = 0; j < kLanes; ++j) {
      const bool earlier_tie = best[c][j] == m && at[c][j] >= 0 && at[c][j] < where;
      if (best[c][j] > m || earlier_tie) {
        m = best[c][j];
        where = at[c][j];
      }
    }
  }
  for (; i < n; ++i) {
    if (x[i] > m) {
      m = x[i];
      where = i;
    }
  }
  if (where >= 0) return static_cast<int32_t>(where);
  for (int64_t k = 0; k < n; ++k) {  // nothing above -inf: the first -inf
    if (x[k] == m) return static_cast<int32_t>(k);
  }
  return 0;
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

// p[i] = e^((x[i] - m) * inv_t), for arguments <= 0 (or NaN): Cody-Waite
// reduction v = k ln2 + r, e^r by its Taylor series to r^7, times 2^k built
// from bits; below -87 (a weight under 2^-125 of the largest) the result is
// exactly 0. Vectorized by the compiler (with -fno-trapping-math).
KILN_VOCAB_LOOP void ScaledExp(const float* x, float m, float inv_t, float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float arg = (x[i] - m) * inv_t;
    const float v = arg < -87.0f ? -87.0f : arg;
    // Round to nearest by the 1.5 * 2^23 trick (exact for |v * log2e| < 2^22).
    const float k = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = v - k * 0.693359375f;  // ln2's high part: k * it is exact
    r = r - k * -2.12194440e-4f;     // and its low part
    float e = 1.0f / 5040.0f;
    e = e * r + 1.0f / 720.0f;
    e = e * r + 1.0f / 120.0f;
    e = e * r + 1.0f / 24.0f;
    e = e * r + 1.0f / 6.0f;
    e = e * r + 0.5f;
    e = e * r + 1.0f;
    e = e * r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;  // 2^k, k in [-126, 0]
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    p[i] = arg < -87.0f ? 0.0f : e * scale;
  }
}

// Sums of consecutive chunks of kSumChunk values (the last may be shorter),
// in double; returns their total. Fixed order, so the same on every machine.
constexpr int64_t kSumChunk = 1024;
KILN_VOCAB_LOOP double ChunkSums(const float* x, int64_t n, std::vector<double>& sums) {
  sums.clear();
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kSumChunk) {
    const int64_t end = std::min(n, begin + kSumChunk);
    double part[4] = {0, 0, 0, 0};  // four chains: one add's latency each, not n
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {
      for (int j = 0; j < 4; ++j) part[j] += x[i + j];
    }
    for (; i < end; ++i) part[0] += x[i];
    const double chunk = (part[0] + part[1]) + (part[2] + part[3]);
    sums.push_back(chunk);
    total += chunk;
  }
  return total;
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

// Sets every token the mask does not allow to -inf; false when none is left.
static bool ApplyMask(float* logits, int64_t vocab, const std::vector<uint32_t>& allowed) {
  const int64_t covered = std::min<int64_t>(vocab, static_cast<int64_t>(allowed.size()) * 32);
  bool any = false;
  for (int64_t w = 0; w * 32 < covered; ++w) {
    const uint32_t word = allowed[static_cast<size_t>(w)];
    const int64_t end = std::min<int64_t>(covered, w * 32 + 32);
    if (word == 0xffffffffu && end == w * 32 + 32) {
      any = true;
      continue;
    }
    for (int64_t i = w * 32; i < end; ++i) {
      if ((word >> (i - w * 32)) & 1u) {
        any = true;
      } else {
        logits[i] = -std::numeric_limits<float>::infinity();
      }
    }
  }
  for (int64_t i = covered; i < vocab; ++i) logits[i] = -std::numeric_limits<float>::infinity();
  return any;
}

// The distribution a row's token is drawn from: the greedy token, or
// unnormalised weights (p, over the whole vocabulary, with chunk sums for
// the draw) of which, when truncated, only ids[0, keep) are candidates.
// Sample draws from it and ProcessedDistribution writes it out, so that
// speculative verification sees exactly what plain decoding draws from.
struct Candidates {
  bool none = false;    // the mask allows nothing
  int32_t greedy = -1;  // temperature 0: the token
  const float* p = nullptr;
  double sum = 0;  // of p over the whole vocabulary
  const std::vector<double>* chunk_sums = nullptr;
  bool truncated = false;
  const int32_t* ids = nullptr;  // candidates by descending weight, when truncated
  int64_t keep = 0;
};

// Applies the mask, the penalties, the temperature and top-k, min-p and
// top-p to `logits` (edited in place). The weights live in per-thread
// buffers until the next call on the same thread.
static Candidates Prepare(float* logits, int64_t vocab, const SamplingParams& params,
                          const SamplerState& state, const std::vector<uint32_t>* allowed) {
  Candidates c;
  if (allowed != nullptr && !ApplyMask(logits, vocab, *allowed)) {
    c.none = true;  // the grammar allows nothing: the caller ends the request
    return c;
  }

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
    c.greedy = Argmax(logits, vocab);
    return c;
  }

  // Weights at temperature T: e^((x - max) / T), in [0, 1], unnormalised.
  // Kept in per-thread buffers: a vocabulary's worth of fresh memory per
  // token costs page faults on every call.
  thread_local std::vector<float> p;
  thread_local std::vector<double> chunk_sums;
  p.resize(static_cast<size_t>(vocab));
  float m = MaxOf(logits, vocab);
  if (m == -std::numeric_limits<float>::infinity()) m = logits[Argmax(logits, vocab)];  // NaNs and -infs only
  const auto inv_t = static_cast<float>(1.0 / params.temperature);
  ScaledExp(logits, m, inv_t, p.data(), vocab);
  c.sum = ChunkSums(p.data(), vocab, chunk_sums);
  c.p = p.data();
  c.chunk_sums = &chunk_sums;

  c.truncated = (params.top_k > 0 && params.top_k < vocab) || params.min_p > 0 || params.top_p < 1.0;
  if (!c.truncated) return c;

  // Candidates in descending weight (ties by id), truncated by top-k,
  // min-p and top-p. Only as many as needed are sorted.
  thread_local std::vector<int32_t> ids;
  ids.resize(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  auto by_prob = [&](int32_t a, int32_t b) {
    return p[static_cast<size_t>(a)] != p[static_cast<size_t>(b)] ? p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]
                                                                  : a < b;
  };
  int64_t keep = vocab;
  if (params.top_k > 0) keep = std::min<int64_t>(keep, params.top_k);
  if (params.min_p > 0) {
    const double cutoff = params.min_p;  // of the most likely token's weight, which is 1
    int64_t above = 0;
    for (float x : p) above += x >= cutoff ? 1 : 0;
    keep = std::min(keep, std::max<int64_t>(above, 1));
  }
  if (params.top_p < 1.0) {
    // Grow the sorted prefix until it holds top_p of the mass.
    const double mass = params.top_p * c.sum;
    int64_t k = std::min<int64_t>(keep, 64);
    while (true) {
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), by_prob);
      double cum = 0;
      int64_t need = -1;
      for (int64_t i = 0; i < k; ++i) {
        cum += p[static_cast<size_t>(ids[static_cast<size_t>(i)])];
        if (cum >= mass) {
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
  } else {
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), by_prob);
  }
  c.ids = ids.data();
  c.keep = keep;
  return c;
}

// One draw from the candidates with the state's generator.
static int32_t Draw(const Candidates& c, const float* logits, int64_t vocab, Rng& rng) {
  if (c.greedy >= 0) return c.greedy;
  const float* p = c.p;
  if (!c.truncated) {
    // The whole vocabulary: find the draw's chunk by the chunk sums, then
    // its token within the chunk.
    const std::vector<double>& chunk_sums = *c.chunk_sums;
    const double r = rng.Uniform() * c.sum;
    double acc = 0;
    size_t chunk = 0;
    while (chunk + 1 < chunk_sums.size() && r >= acc + chunk_sums[chunk]) acc += chunk_sums[chunk++];
    const int64_t begin = static_cast<int64_t>(chunk) * kSumChunk, end = std::min(vocab, begin + kSumChunk);
    int32_t chosen = -1;
    for (int64_t i = begin; i < end; ++i) {
      if (p[i] == 0) continue;
      chosen = static_cast<int32_t>(i);  // the last nonzero one if rounding leaves r past the end
      acc += p[i];
      if (r < acc) break;
    }
    return chosen >= 0 ? chosen : Argmax(logits, vocab);
  }
  double total = 0;
  for (int64_t i = 0; i < c.keep; ++i) total += p[c.ids[i]];
  double r = rng.Uniform() * total;
  int32_t chosen = c.ids[c.keep - 1];
  double acc = 0;
  for (int64_t i = 0; i < c.keep; ++i) {
    int32_t id = c.ids[i];
    acc += p[id];
    if (r < acc) {
      chosen = id;
      break;
    }
  }
  return chosen;
}

void FillLogprobs(const float* raw_logits, int64_t vocab, const SamplingParams& params,
                  SampleResult* result) {
  if (!params.logprobs && params.top_logprobs <= 0) return;
  const double lse = LogSumExp(raw_logits, vocab);
  if (params.top_logprobs > 0) result->top = TopLogprobs(raw_logits, vocab, params.top_logprobs, lse);
  if (result->token >= 0) result->logprob = static_cast<float>(raw_logits[result->token] - lse);
}

SampleResult Sample(float* logits, int64_t vocab, const SamplingParams& params, SamplerState& state,
                    const std::vector<uint32_t>* allowed) {
  // Log-probabilities are of the raw distribution: the steps below edit
  // the logits in place.
  thread_local std::vector<float> raw;
  const bool want_logprobs = params.logprobs || params.top_logprobs > 0;
  if (want_logprobs) raw.assign(logits, logits + vocab);
  const Candidates c = Prepare(logits, vocab, params, state, allowed);
  SampleResult result;
  result.token = c.none ? -1 : Draw(c, logits, vocab, state.rng);
  if (want_logprobs) FillLogprobs(raw.data(), vocab, params, &result);
  return result;
}

bool ProcessedDistribution(float* logits, int64_t vocab, const SamplingParams& params,
                           const SamplerState& state, const std::vector<uint32_t>* allowed,
                           std::vector<float>* probs) {
  const Candidates c = Prepare(logits, vocab, params, state, allowed);
  if (c.none) return false;
  probs->assign(static_cast<size_t>(vocab), 0.0f);
  if (c.greedy >= 0) {
    (*probs)[static_cast<size_t>(c.greedy)] = 1.0f;
    return true;
  }
  if (!c.truncated) {
    if (!(c.sum > 0)) {  // no weight anywhere (NaN logits): Draw's fallback
      (*probs)[static_cast<size_t>(Argmax(logits, vocab))] = 1.0f;
      return true;
    }
    const double inv = 1.0 / c.sum;
    for (int64_t i = 0; i < vocab; ++i) (*probs)[static_cast<size_t>(i)] = static_cast<float>(c.p[i] * inv);
    return true;
  }
  double total = 0;
  for (int64_t i = 0; i < c.keep; ++i) total += c.p[c.ids[i]];
  if (!(total > 0)) {
    (*probs)[static_cast<size_t>(c.ids[c.keep - 1])] = 1.0f;  // Draw's fallback
    return true;
  }
  for (int64_t i = 0; i < c.keep; ++i) {
    (*probs)[static_cast<size_t>(c.ids[i])] = static_cast<float>(c.p[c.ids[i]] / total);
  }
  return true;
}

int32_t DrawFromWeights(std::span<const float> weights, Rng& rng) {
  double total = 0;
  int32_t last = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] > 0) {
      total += weights[i];
      last = static_cast<int32_t>(i);
    }
  }
  if (last < 0) return -1;
  const double r = rng.Uniform() * total;
  double acc = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] > 0)) continue;
    acc += weights[i];
    if (r < acc) return static_cast<int32_t>(i);
  }
  return last;  // rounding left r at the end
}

}  // namespace kiln
