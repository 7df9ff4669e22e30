// Paged attention for a group of query heads sharing a KV head, for any
// Simd traits S: the pieces both kernels use (rows of each cache type, the
// weighted sums of values) and the kernel of the int8 cache, one key at a
// time. The float caches' kernel, keys in lanes, is in
// attention_keys_in_lanes.h.
//
// Online softmax in fp32 over the keys in increasing position, one KV block
// at a time: the scores of the block's keys, then the running maximum, the
// rescaling of the running sum and output, and the block's keys added in
// order. Blocks are aligned to absolute positions, so the arithmetic for a
// (token, head) depends only on its position and the cache contents: never
// on the other tokens of the batch, on prefill chunking or on threads.
// Everything here is a template on S (see linear_simd.h for why).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/kv_prefetch.h"
#include "backend/cpu/kernels/simd_math.h"

namespace kiln::cpu {
namespace attention_detail {

template <class S, ElemType KV>
struct KvRow;
template <class S>
struct KvRow<S, ElemType::kF32> {
  using T = float;
  static typename S::V Load(const T* p) { return S::Load(p); }
  static typename S::V LoadPart(const T* p, int n) { return S::LoadPart(p, n); }
};
template <class S>
struct KvRow<S, ElemType::kF16> {
  using T = uint16_t;
  static typename S::V Load(const T* p) { return S::LoadF16(p); }
  static typename S::V LoadPart(const T* p, int n) { return S::LoadF16Part(p, n); }
};
template <class S>
struct KvRow<S, ElemType::kBF16> {
  using T = uint16_t;
  static typename S::V Load(const T* p) { return S::LoadBf16(p); }
  static typename S::V LoadPart(const T* p, int n) { return S::LoadBf16Part(p, n); }
};

// Rows of the int8 cache, widened exactly; their per-row scales are applied
// by AttentionWith.
template <class S>
struct KvRowI8 {
  using T = int8_t;
  static typename S::V Load(const T* p) {
#if defined(__x86_64__)
    if constexpr (S::kLanes == 8) {
      return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    } else if constexpr (S::kLanes == 16) {
      return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
#endif
    alignas(64) float f[S::kLanes];
    for (int i = 0; i < S::kLanes; ++i) f[i] = static_cast<float>(p[i]);
    return S::Load(f);
  }
  static typename S::V LoadPart(const T* p, int n) {
    alignas(64) float f[S::kLanes] = {};
    for (int i = 0; i < n; ++i) f[i] = static_cast<float>(p[i]);
    return S::Load(f);
  }
};

// q . k over d elements: vector lanes, then the fixed reduction tree.
template <class S, class Row>
float Dot(const float* q, const typename Row::T* k, int d) {
  constexpr int L = S::kLanes;
  auto acc = S::Zero();
  int i = 0;
  for (; i + L <= d; i += L) acc = S::Fma(S::Load(q + i), Row::Load(k + i), acc);
  if (i < d) acc = S::Fma(S::LoadPart(q + i, d - i), Row::LoadPart(k + i, d - i), acc);
  return S::ReduceAdd(acc);
}

// N keys' Dot at once (k_j = k + j * stride), each times mul[j], for d a
// multiple of the vector width: the same arithmetic per key, N independent
// FMA chains instead of one to hide the FMA latency (8 keep both FMA pipes
// of a core busy). The products are taken here, not by the caller on `out`,
// which would reload each sum right after its store. (A tail for other d
// made GCC keep the chains on the stack.)
template <class S, class Row, int N>
void DotN(const float* q, const typename Row::T* k, int64_t stride, int d, const float* mul, float* out) {
  constexpr int L = S::kLanes;
  typename S::V acc[N];
  for (int j = 0; j < N; ++j) acc[j] = S::Zero();
  for (int i = 0; i < d; i += L) {
    const auto qv = S::Load(q + i);
    for (int j = 0; j < N; ++j) acc[j] = S::Fma(qv, Row::Load(k + j * stride + i), acc[j]);
  }
  for (int j = 0; j < N; ++j) out[j] = S::ReduceAdd(acc[j]) * mul[j];
}

#if defined(__AVX512F__)
// DotN for 16 keys with 16-lane vectors, the 16 sums reduced together: the
// same pairs added in the same order as SimdAvx512::ReduceAdd's tree (lower
// half + upper half, then quarters, lanes 0-1 + 2-3, lane 0 + 1), with the
// partial sums of several keys side by side in each vector, so every key's
// score has the bits DotN gives it, in 45 instructions instead of 112.
// The keys go by in the inner loop with 4 vectors of q held, so that one
// pointer walks the keys (16 kept GCC short of registers) and each key's
// products are added in element order, as DotN adds them.
template <class S, class Row>
__attribute__((always_inline)) inline void Dot16(const float* q, const typename Row::T* k, int64_t stride, int d,
                                                 const float* mul, float* out) {
  static_assert(S::kLanes == 16);
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  int i = 0;
  for (; i + 64 <= d; i += 64) {
    __m512 qv[4];
    for (int u = 0; u < 4; ++u) qv[u] = _mm512_loadu_ps(q + i + 16 * u);
    const typename Row::T* kj = k + i;
    for (int j = 0; j < 16; ++j, kj += stride) {
      for (int u = 0; u < 4; ++u) acc[j] = _mm512_fmadd_ps(qv[u], Row::Load(kj + 16 * u), acc[j]);
    }
  }
  for (; i < d; i += 16) {
    const __m512 qv = _mm512_loadu_ps(q + i);
    const typename Row::T* kj = k + i;
    for (int j = 0; j < 16; ++j, kj += stride) acc[j] = _mm512_fmadd_ps(qv, Row::Load(kj), acc[j]);
  }
  // Halves: b[j] = key j's 8 sums, then key j + 8's.
  __m512 b[8];
  for (int j = 0; j < 8; ++j) {
    b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[j], acc[j + 8], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(acc[j], acc[j + 8], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Quarters: c[j] = the 4 sums of keys j, j + 8, j + 4, j + 12.
  __m512 c[4];
  for (int j = 0; j < 4; ++j) {
    c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(b[j], b[j + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[j], b[j + 4], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Lanes 0-1 + 2-3 within each quarter, c[j]'s key then c[j + 2]'s.
  __m512 e[2];
  for (int j = 0; j < 2; ++j) {
    e[j] = _mm512_add_ps(_mm512_shuffle_ps(c[j], c[j + 2], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(c[j], c[j + 2], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Lane 0 + 1: the sums of keys 0 2 1 3, 8 10 9 11, 4 6 5 7, 12 14 13 15.
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i key_order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_permutexvar_ps(key_order, sums), _mm512_loadu_ps(mul)));
}
#endif

// The scaled scores s[j] of keys j0..j1 (key j at k + j * stride): key j's
// Dot times mul[j].
template <class S, class Row>
void Scores(const float* q, const typename Row::T* k, int64_t stride, int d, const float* mul, int j0, int j1,
            float* s) {
  int j = j0;
  if (d % S::kLanes == 0) {
#if defined(__AVX512F__)
    if constexpr (S::kLanes == 16) {
      for (; j + 15 <= j1; j += 16) Dot16<S, Row>(q, k + j * stride, stride, d, mul + j, s + j);
    }
#endif
    for (; j + 7 <= j1; j += 8) DotN<S, Row, 8>(q, k + j * stride, stride, d, mul + j, s + j);
    for (; j + 3 <= j1; j += 4) DotN<S, Row, 4>(q, k + j * stride, stride, d, mul + j, s + j);
  }
  for (; j <= j1; ++j) s[j] = Dot<S, Row>(q, k + j * stride, d) * mul[j];
}

// The factors rows' accumulated values are rescaled by as their softmax
// maxima grow: row r's before the keys of chunk c of a block (keys [c *
// keys, (c + 1) * keys)) at at[c * stride + r]. A kernel whose softmax
// steps once a block has one chunk (the defaults). The weighted values of
// a block's chunks are added in one pass, each chunk's factor applied
// where its keys begin: the arithmetic of a pass a chunk, without a
// store and reload of the sums between chunks and with chains of FMAs as
// long as the block's.
struct Corrections {
  const float* at;
  int64_t stride = 0;
  int keys = 1 << 30;

  float Of(int64_t row, int j) const { return at[(j / keys) * stride + row]; }
  Corrections Rows(int64_t first) const { return {at + first, stride, keys}; }
  // The last key of [j, j1] in j's chunk.
  int RunEnd(int j, int j1) const {
    const int chunk_end = (j / keys + 1) * keys - 1;
    return chunk_end < j1 ? chunk_end : j1;
  }
};

// AccumulateValues for d a multiple of kVecs vectors: kVecs vectors of the
// row stay in registers while the block's keys stream past, with no lane
// counts to test per key. Each element's arithmetic is the general loop's.
template <class S, class Row, int kVecs>
void AccumulateValuesFull(float* acc, Corrections corr, const float* p, const typename Row::T* v0,
                          int64_t v_stride, int j0, int j1, int d) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  for (int c0 = 0; c0 < d; c0 += kVecs * L) {
    V sum[kVecs];
    for (int u = 0; u < kVecs; ++u) sum[u] = S::Load(acc + c0 + u * L);
    for (int jb = j0; jb <= j1;) {
      const int je = corr.RunEnd(jb, j1);
      const V c = S::Set1(corr.Of(0, jb));
      for (int u = 0; u < kVecs; ++u) sum[u] = S::Mul(sum[u], c);
      for (int j = jb; j <= je; ++j) {
        const V pj = S::Set1(p[j]);
        const auto* v = v0 + j * v_stride + c0;
        for (int u = 0; u < kVecs; ++u) sum[u] = S::Fma(pj, Row::Load(v + u * L), sum[u]);
      }
      jb = je + 1;
    }
    for (int u = 0; u < kVecs; ++u) S::Store(acc + c0 + u * L, sum[u]);
  }
}

// Vectors of a row AccumulateValuesHeads keeps in registers for several
// heads at once (up to kValueHeads): kValueVecs x kValueHeads accumulators,
// kValueVecs values and one weight fit 32 registers as 4 x 6 and 16 as 2 x
// 6. On AVX2 4 x 2 (two heads a pass, four passes for 7 heads) ran the
// values of a 512-key decode near a quarter of the FMA peak and 4 x 4
// spilled a sum a head; 2 x 6 runs them about 1.8x faster (Zen 3, one
// thread, two KV heads: 25 -> 13-15 us).
template <class S>
inline constexpr int kValueVecs = S::kLanes == 16 ? 4 : 2;
template <class S>
inline constexpr int kValueHeads = 6;

// AccumulateValuesFull<S, Row, kValueVecs<S>> for H heads sharing the value
// rows (the query heads of one KV head): head h's accumulators at acc + h *
// d, its weights at p + h * p_stride. Each value vector is loaded once for
// all H heads, and the H x kValueVecs FMA chains are independent, where one
// head's few chains wait on the FMA latency. Each element's arithmetic is
// the one-head loop's.
template <class S, class Row, int H>
void AccumulateValuesHeads(float* acc, Corrections corr, const float* p, int64_t p_stride,
                           const typename Row::T* v0, int64_t v_stride, int j0, int j1, int d) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  constexpr int kVecs = kValueVecs<S>;
  for (int c0 = 0; c0 < d; c0 += kVecs * L) {
    V sum[H][kVecs];
    for (int h = 0; h < H; ++h) {
      for (int u = 0; u < kVecs; ++u) sum[h][u] = S::Load(acc + h * d + c0 + u * L);
    }
    for (int jb = j0; jb <= j1;) {
      const int je = corr.RunEnd(jb, j1);
      for (int h = 0; h < H; ++h) {
        const V c = S::Set1(corr.Of(h, jb));
        for (int u = 0; u < kVecs; ++u) sum[h][u] = S::Mul(sum[h][u], c);
      }
      for (int j = jb; j <= je; ++j) {
        const auto* v = v0 + j * v_stride + c0;
        V vv[kVecs];
        for (int u = 0; u < kVecs; ++u) vv[u] = Row::Load(v + u * L);
        for (int h = 0; h < H; ++h) {
          const V pj = S::Set1(p[h * p_stride + j]);
          for (int u = 0; u < kVecs; ++u) sum[h][u] = S::Fma(pj, vv[u], sum[h][u]);
        }
      }
      jb = je + 1;
    }
    for (int h = 0; h < H; ++h) {
      for (int u = 0; u < kVecs; ++u) S::Store(acc + h * d + c0 + u * L, sum[h][u]);
    }
  }
}

// Heads [0, heads) of AccumulateValuesHeads, a few at a time (as many as
// the registers hold), in passes of near equal size: 7 heads as 6 + 1 left
// the last pass one head's chains, waiting on the FMA latency.
// REQUIRES: d a multiple of kValueVecs<S> vectors.
template <class S, class Row>
void AccumulateValuesGroup(float* acc, Corrections corr, const float* p, int64_t p_stride,
                           const typename Row::T* v0, int64_t v_stride, int j0, int j1, int d, int heads) {
  constexpr int kMaxHeads = kValueHeads<S>;
  const int passes = (heads + kMaxHeads - 1) / kMaxHeads;
  for (int pass = 0, h = 0; pass < passes; ++pass) {
    const int count = heads * (pass + 1) / passes - h;
    float* a = acc + static_cast<int64_t>(h) * d;
    const Corrections c = corr.Rows(h);
    const float* w = p + h * p_stride;
    h += count;
    switch (count) {
      case 1: AccumulateValuesHeads<S, Row, 1>(a, c, w, p_stride, v0, v_stride, j0, j1, d); break;
      case 2: AccumulateValuesHeads<S, Row, 2>(a, c, w, p_stride, v0, v_stride, j0, j1, d); break;
      case 3: AccumulateValuesHeads<S, Row, 3>(a, c, w, p_stride, v0, v_stride, j0, j1, d); break;
      case 4: AccumulateValuesHeads<S, Row, 4>(a, c, w, p_stride, v0, v_stride, j0, j1, d); break;
      case 5: AccumulateValuesHeads<S, Row, 5>(a, c, w, p_stride, v0, v_stride, j0, j1, d); break;
      default: AccumulateValuesHeads<S, Row, kMaxHeads>(a, c, w, p_stride, v0, v_stride, j0, j1, d); break;
    }
  }
}

// acc[0, d) = acc * correction + sum over j in [j0, j1] of p[j] * v_j, the
// keys added in increasing j. Up to 4 vectors of the row stay in registers
// while the block's keys stream past.
template <class S, class Row>
void AccumulateValues(float* acc, Corrections corr, const float* p, const typename Row::T* v0,
                      int64_t v_stride, int j0, int j1, int d) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  if (d % (8 * L) == 0) return AccumulateValuesFull<S, Row, 8>(acc, corr, p, v0, v_stride, j0, j1, d);
  if (d % (4 * L) == 0) return AccumulateValuesFull<S, Row, 4>(acc, corr, p, v0, v_stride, j0, j1, d);
  // Small heads (16 or 32 elements: the tiny models') without the general
  // loop's lane counts, which cost three times the FMAs themselves.
  if (d % (2 * L) == 0) return AccumulateValuesFull<S, Row, 2>(acc, corr, p, v0, v_stride, j0, j1, d);
  if (d % L == 0) return AccumulateValuesFull<S, Row, 1>(acc, corr, p, v0, v_stride, j0, j1, d);
  constexpr int kChunk = 4 * L;
  for (int c0 = 0; c0 < d; c0 += kChunk) {
    int lanes[4];
    V sum[4];
    for (int u = 0; u < 4; ++u) {
      int left = d - c0 - u * L;
      lanes[u] = left <= 0 ? 0 : left > L ? L : left;
      sum[u] = lanes[u] == 0 ? S::Zero() : S::LoadPart(acc + c0 + u * L, lanes[u]);
    }
    for (int jb = j0; jb <= j1;) {
      const int je = corr.RunEnd(jb, j1);
      const V c = S::Set1(corr.Of(0, jb));
      for (int u = 0; u < 4; ++u) sum[u] = S::Mul(sum[u], c);
      for (int j = jb; j <= je; ++j) {
        const V pj = S::Set1(p[j]);
        const auto* v = v0 + j * v_stride + c0;
        for (int u = 0; u < 4; ++u) {
          if (lanes[u] == L) {
            sum[u] = S::Fma(pj, Row::Load(v + u * L), sum[u]);
          } else if (lanes[u] > 0) {
            sum[u] = S::Fma(pj, Row::LoadPart(v + u * L, lanes[u]), sum[u]);
          }
        }
      }
      jb = je + 1;
    }
    for (int u = 0; u < 4; ++u) {
      if (lanes[u] > 0) S::StorePart(acc + c0 + u * L, sum[u], lanes[u]);
    }
  }
}

// AccumulateValuesGroup over a work item's rows (row r: token r / heads):
// all rows at once where every token sees the same keys [j0s[0], j1s[0]]
// of the block, else each token's heads over its own keys.
template <class S, class Row>
void AccumulateTokensValues(float* acc, Corrections corrections, const float* p, int64_t p_stride,
                            const typename Row::T* v0, int64_t v_stride, const int* j0s, const int* j1s,
                            bool same, int d, int heads, int tokens) {
  if (same) {
    return AccumulateValuesGroup<S, Row>(acc, corrections, p, p_stride, v0, v_stride, j0s[0], j1s[0], d,
                                         heads * tokens);
  }
  for (int t = 0; t < tokens; ++t) {
    if (j0s[t] > j1s[t]) continue;
    const int64_t r = static_cast<int64_t>(t) * heads;
    AccumulateValuesGroup<S, Row>(acc + r * d, corrections.Rows(r), p + r * p_stride, p_stride, v0, v_stride,
                                  j0s[t], j1s[t], d, heads);
  }
}

// Each row's acc divided by its softmax sum, into its place in a.out.
template <class S>
void StoreNormalizedRows(const AttentionArgs& a, const float* acc, const float* running_sum, int rows,
                         int heads) {
  constexpr int L = S::kLanes;
  const int d = a.head_dim;
  for (int i = 0; i < rows; ++i) {
    const auto inv = S::Set1(running_sum[i]);
    const float* src = acc + static_cast<int64_t>(i) * d;
    float* out = a.out + (i / heads) * a.ldo + static_cast<int64_t>(a.h_begin + i % heads) * d;
    for (int c = 0; c < d; c += L) {
      const int n = d - c < L ? d - c : L;
      S::StorePart(out + c, S::Div(S::LoadPart(src + c, n), inv), n);
    }
  }
}

// s[j] = cap * tanh(s[j] / cap) for j in [j0, j1] (Gemma 2's soft-capped
// scores).
template <class S>
void SoftCap(float* s, int j0, int j1, float cap) {
  constexpr int L = S::kLanes;
  const auto inv = S::Set1(1.0f / cap), c = S::Set1(cap);
  for (int j = j0; j <= j1; j += L) {
    const int n = j1 + 1 - j < L ? j1 + 1 - j : L;
    const auto x = n == L ? S::Load(s + j) : S::LoadPart(s + j, n);
    const auto y = S::Mul(VecTanh<S>(S::Mul(x, inv)), c);
    if (n == L) {
      S::Store(s + j, y);
    } else {
      S::StorePart(s + j, y, n);
    }
  }
}

// The kernel for rows read by Row, a key at a time. With k_scales/v_scales
// (the int8 cache: [slot][kv_heads] floats), key j's score is dot(q, k_j) *
// (k_scale_j * scale) and value j is weighted by p_j * v_scale_j, those
// products kept in `weights` (block_size floats); without them (null) the
// float caches' math, which AttentionKeysInLanes now does faster.
template <class S, class Row>
void AttentionWith(const AttentionArgs& a, const float* k_scales, const float* v_scales, float* weights) {
  using T = typename Row::T;
  constexpr int L = S::kLanes;
  const int heads = a.h_end - a.h_begin;
  const int tokens = a.tokens > 1 ? a.tokens : 1;
  // Row r is token r / heads at query head h_begin + r % heads. The rows of
  // all tokens go through each block's phases together, so that their
  // independent chains of dependent steps overlap.
  const int rows = heads * tokens;
  const int d = a.head_dim;
  const int bs = a.block_size;
  float* scores = a.scratch;                                  // [rows][bs]
  float* acc = scores + static_cast<int64_t>(rows) * bs;      // [rows][d]
  float* running_max = acc + static_cast<int64_t>(rows) * d;  // [rows]
  float* running_sum = running_max + rows;                    // [rows]
  float* key_mul = running_sum + rows;                        // [bs]: each key's score factor
  float* corrections = key_mul + bs;                          // [rows]: this block's rescaling
  // Float caches with whole 4-vector rows add a block's values for all heads
  // at once; the int8 cache weights each head's values by its own scales.
  const bool heads_together = v_scales == nullptr && d % (kValueVecs<S> * L) == 0;
  for (int i = 0; i < rows; ++i) {
    running_max[i] = -std::numeric_limits<float>::infinity();
    running_sum[i] = 0.0f;
    for (int c = 0; c < d; ++c) acc[static_cast<int64_t>(i) * d + c] = 0.0f;
  }
  auto q_row = [&](int r) { return a.q + (r / heads) * a.ldq + static_cast<int64_t>(a.h_begin + r % heads) * d; };

  const int64_t row_stride = static_cast<int64_t>(a.kv_heads) * d;  // between positions in a block
  const int64_t block_elems = static_cast<int64_t>(bs) * row_stride;
  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
  const int last_block = (a.last_pos + tokens - 1) / bs;
  int j0s[kMaxAttentionTokens], j1s[kMaxAttentionTokens];  // each token's keys in the block; none if j0 > j1
  for (int b = a.first_pos / bs; b <= last_block; ++b) {
    const int block_start = b * bs;
    int lo = bs, hi = -1;
    bool same = true;  // every token sees the same keys of this block
    for (int t = 0; t < tokens; ++t) {
      const int first = AttentionFirstPos(a, t), last = a.last_pos + t;
      j0s[t] = (first > block_start ? first : block_start) - block_start;
      j1s[t] = (last < block_start + bs - 1 ? last : block_start + bs - 1) - block_start;
      if (j0s[t] <= j1s[t]) {
        lo = j0s[t] < lo ? j0s[t] : lo;
        hi = j1s[t] > hi ? j1s[t] : hi;
      }
      same = same && j0s[t] == j0s[0] && j1s[t] == j1s[0];
    }
    const int64_t block_offset = static_cast<int64_t>(a.block_table[b]) * block_elems + a.kv_head * d;
    const T* k = k_pool + block_offset;
    const T* v = v_pool + block_offset;
    const int64_t scale_offset = static_cast<int64_t>(a.block_table[b]) * bs * a.kv_heads + a.kv_head;
    const bool next = b < last_block;
    const int64_t next_offset = next ? a.block_table[b + 1] * block_elems + a.kv_head * d : 0;
    for (int j = lo; j <= hi; ++j) {
      key_mul[j] = k_scales == nullptr ? a.scale : k_scales[scale_offset + j * a.kv_heads] * a.scale;
    }
    // The rows' scores and block maxima, then the weights and their sums:
    // per row the same operations in the same key order, each row's chain
    // of dependent scalar steps kept in a register, the rows' chains
    // independent for the core to overlap.
    for (int i = 0; i < rows; ++i) {
      // The next block's rows, in parts between the rows' work: all at
      // once, the requests outnumbered the line fill buffers and stalled.
      if (next) {
        constexpr int64_t kElem = sizeof(T);
        PrefetchKvRows(k_pool, v_pool, next_offset * kElem, row_stride * kElem, d * kElem, bs * i / rows,
                       bs * (i + 1) / rows);
      }
      const int j0 = j0s[i / heads], j1 = j1s[i / heads];
      if (j0 > j1) continue;
      float* s = scores + static_cast<int64_t>(i) * bs;
      Scores<S, Row>(q_row(i), k, row_stride, d, key_mul, j0, j1, s);
      if (a.softcap > 0) SoftCap<S>(s, j0, j1, a.softcap);
      // The block maximum, for now: whole vectors of scores as they were
      // stored (a maximum is the same value in any order), then the rest.
      auto mv = S::Set1(-std::numeric_limits<float>::infinity());
      int j = j0;
      for (; j + L <= j1 + 1; j += L) mv = S::Max(S::Load(s + j), mv);
      float m = S::ReduceMax(mv);
      for (; j <= j1; ++j) m = s[j] > m ? s[j] : m;
      corrections[i] = m;
    }
    for (int i = 0; i < rows; ++i) {
      const int j0 = j0s[i / heads], j1 = j1s[i / heads];
      if (j0 > j1) continue;
      float* s = scores + static_cast<int64_t>(i) * bs;
      const float block_max = corrections[i];
      const float new_max = block_max > running_max[i] ? block_max : running_max[i];
      const float correction = std::exp(running_max[i] - new_max);  // 0 for the first block
      const auto shift = S::Set1(new_max);
      for (int j = j0; j <= j1; j += L) {
        const int n = j1 + 1 - j < L ? j1 + 1 - j : L;
        if (n == L) {
          S::Store(s + j, VecExp<S>(S::Sub(S::Load(s + j), shift)));
        } else {
          S::StorePart(s + j, VecExp<S>(S::Sub(S::LoadPart(s + j, n), shift)), n);
        }
      }
      running_sum[i] *= correction;
      running_max[i] = new_max;
      corrections[i] = correction;
    }
    for (int i = 0; i < rows; ++i) {
      const int j0 = j0s[i / heads], j1 = j1s[i / heads];
      const float* s = scores + static_cast<int64_t>(i) * bs;
      float sum = running_sum[i];
      for (int j = j0; j <= j1; ++j) sum += s[j];
      running_sum[i] = sum;
    }
    if (!heads_together) {
      for (int i = 0; i < rows; ++i) {
        const int j0 = j0s[i / heads], j1 = j1s[i / heads];
        if (j0 > j1) continue;
        const float* p = scores + static_cast<int64_t>(i) * bs;
        if (v_scales != nullptr) {
          const float* vs = v_scales + scale_offset;
          for (int j = j0; j <= j1; ++j) weights[j] = p[j] * vs[j * a.kv_heads];
          p = weights;
        }
        AccumulateValues<S, Row>(acc + static_cast<int64_t>(i) * d, Corrections{corrections + i}, p, v,
                                 row_stride, j0, j1, d);
      }
    } else {
      AccumulateTokensValues<S, Row>(acc, Corrections{corrections}, scores, bs, v, row_stride, j0s, j1s, same,
                                     d, heads, tokens);
    }
  }

  StoreNormalizedRows<S>(a, acc, running_sum, rows, heads);
}

}  // namespace attention_detail

// Attention over the int8 cache: k_pool/v_pool hold int8 values, scaled per
// (slot, KV head) by k_scales/v_scales; `weights` holds block_size floats.
template <class S>
void VecAttentionI8(const AttentionArgs& a, const float* k_scales, const float* v_scales, float* weights) {
  attention_detail::AttentionWith<S, attention_detail::KvRowI8<S>>(a, k_scales, v_scales, weights);
}

}  // namespace kiln::cpu
