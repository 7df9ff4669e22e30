// Paged attention for one query token and a group of query heads sharing a
// KV head, for any Simd traits S.
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

// The scaled scores s[j] of keys j0..j1 (key j at k + j * stride): key j's
// Dot times mul[j].
template <class S, class Row>
void Scores(const float* q, const typename Row::T* k, int64_t stride, int d, const float* mul, int j0, int j1,
            float* s) {
  int j = j0;
  if (d % S::kLanes == 0) {
    for (; j + 7 <= j1; j += 8) DotN<S, Row, 8>(q, k + j * stride, stride, d, mul + j, s + j);
    for (; j + 3 <= j1; j += 4) DotN<S, Row, 4>(q, k + j * stride, stride, d, mul + j, s + j);
  }
  for (; j <= j1; ++j) s[j] = Dot<S, Row>(q, k + j * stride, d) * mul[j];
}

// AccumulateValues for d a multiple of kVecs vectors: kVecs vectors of the
// row stay in registers while the block's keys stream past, with no lane
// counts to test per key. Each element's arithmetic is the general loop's.
template <class S, class Row, int kVecs>
void AccumulateValuesFull(float* acc, float correction, const float* p, const typename Row::T* v0,
                          int64_t v_stride, int j0, int j1, int d) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  const V corr = S::Set1(correction);
  for (int c0 = 0; c0 < d; c0 += kVecs * L) {
    V sum[kVecs];
    for (int u = 0; u < kVecs; ++u) sum[u] = S::Mul(S::Load(acc + c0 + u * L), corr);
    for (int j = j0; j <= j1; ++j) {
      const V pj = S::Set1(p[j]);
      const auto* v = v0 + j * v_stride + c0;
      for (int u = 0; u < kVecs; ++u) sum[u] = S::Fma(pj, Row::Load(v + u * L), sum[u]);
    }
    for (int u = 0; u < kVecs; ++u) S::Store(acc + c0 + u * L, sum[u]);
  }
}

// acc[0, d) = acc * correction + sum over j in [j0, j1] of p[j] * v_j, the
// keys added in increasing j. Up to 4 vectors of the row stay in registers
// while the block's keys stream past.
template <class S, class Row>
void AccumulateValues(float* acc, float correction, const float* p, const typename Row::T* v0,
                      int64_t v_stride, int j0, int j1, int d) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  if (d % (8 * L) == 0) return AccumulateValuesFull<S, Row, 8>(acc, correction, p, v0, v_stride, j0, j1, d);
  if (d % (4 * L) == 0) return AccumulateValuesFull<S, Row, 4>(acc, correction, p, v0, v_stride, j0, j1, d);
  constexpr int kChunk = 4 * L;
  const V corr = S::Set1(correction);
  for (int c0 = 0; c0 < d; c0 += kChunk) {
    int lanes[4];
    V sum[4];
    for (int u = 0; u < 4; ++u) {
      int left = d - c0 - u * L;
      lanes[u] = left <= 0 ? 0 : left > L ? L : left;
      sum[u] = lanes[u] == 0 ? S::Zero() : S::Mul(S::LoadPart(acc + c0 + u * L, lanes[u]), corr);
    }
    for (int j = j0; j <= j1; ++j) {
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
    for (int u = 0; u < 4; ++u) {
      if (lanes[u] > 0) S::StorePart(acc + c0 + u * L, sum[u], lanes[u]);
    }
  }
}

// The kernel for rows read by Row. With k_scales/v_scales (the int8 cache:
// [slot][kv_heads] floats), key j's score is dot(q, k_j) * (k_scale_j *
// scale) and value j is weighted by p_j * v_scale_j, those products kept in
// `weights` (block_size floats); without them (null) the float caches' math.
template <class S, class Row>
void AttentionWith(const AttentionArgs& a, const float* k_scales, const float* v_scales, float* weights) {
  using T = typename Row::T;
  constexpr int L = S::kLanes;
  const int heads = a.h_end - a.h_begin;
  const int d = a.head_dim;
  const int bs = a.block_size;
  float* scores = a.scratch;                                   // [heads][bs]
  float* acc = scores + static_cast<int64_t>(heads) * bs;      // [heads][d]
  float* running_max = acc + static_cast<int64_t>(heads) * d;  // [heads]
  float* running_sum = running_max + heads;                    // [heads]
  float* key_mul = running_sum + heads;                        // [bs]: each key's score factor
  for (int i = 0; i < heads; ++i) {
    running_max[i] = -std::numeric_limits<float>::infinity();
    running_sum[i] = 0.0f;
    for (int c = 0; c < d; ++c) acc[static_cast<int64_t>(i) * d + c] = 0.0f;
  }

  const int64_t row_stride = static_cast<int64_t>(a.kv_heads) * d;  // between positions in a block
  const int64_t block_elems = static_cast<int64_t>(bs) * row_stride;
  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
  for (int b = a.first_pos / bs; b <= a.last_pos / bs; ++b) {
    const int block_start = b * bs;
    const int j0 = (a.first_pos > block_start ? a.first_pos : block_start) - block_start;
    const int j1 = (a.last_pos < block_start + bs - 1 ? a.last_pos : block_start + bs - 1) - block_start;
    const int64_t block_offset = static_cast<int64_t>(a.block_table[b]) * block_elems + a.kv_head * d;
    const T* k = k_pool + block_offset;
    const T* v = v_pool + block_offset;
    const int64_t scale_offset = static_cast<int64_t>(a.block_table[b]) * bs * a.kv_heads + a.kv_head;
    for (int j = j0; j <= j1; ++j) {
      key_mul[j] = k_scales == nullptr ? a.scale : k_scales[scale_offset + j * a.kv_heads] * a.scale;
    }
    for (int i = 0; i < heads; ++i) {
      const float* q = a.q + static_cast<int64_t>(a.h_begin + i) * d;
      float* s = scores + static_cast<int64_t>(i) * bs;
      Scores<S, Row>(q, k, row_stride, d, key_mul, j0, j1, s);

      float block_max = s[j0];
      for (int j = j0 + 1; j <= j1; ++j) block_max = s[j] > block_max ? s[j] : block_max;
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
      float sum = running_sum[i] * correction;
      for (int j = j0; j <= j1; ++j) sum += s[j];
      running_sum[i] = sum;
      running_max[i] = new_max;
      const float* p = s;
      if (v_scales != nullptr) {
        const float* vs = v_scales + scale_offset;
        for (int j = j0; j <= j1; ++j) weights[j] = s[j] * vs[j * a.kv_heads];
        p = weights;
      }
      AccumulateValues<S, Row>(acc + static_cast<int64_t>(i) * d, correction, p, v, row_stride, j0, j1, d);
    }
  }

  for (int i = 0; i < heads; ++i) {
    const auto inv = S::Set1(running_sum[i]);
    const float* src = acc + static_cast<int64_t>(i) * d;
    float* out = a.out + static_cast<int64_t>(a.h_begin + i) * d;
    for (int c = 0; c < d; c += L) {
      const int n = d - c < L ? d - c : L;
      S::StorePart(out + c, S::Div(S::LoadPart(src + c, n), inv), n);
    }
  }
}

template <class S, ElemType KV>
void AttentionTyped(const AttentionArgs& a) {
  AttentionWith<S, KvRow<S, KV>>(a, nullptr, nullptr, nullptr);
}

}  // namespace attention_detail

template <class S>
void VecAttention(const AttentionArgs& a) {
  switch (a.kv_type) {
    case ElemType::kF32: return attention_detail::AttentionTyped<S, ElemType::kF32>(a);
    case ElemType::kF16: return attention_detail::AttentionTyped<S, ElemType::kF16>(a);
    case ElemType::kBF16: return attention_detail::AttentionTyped<S, ElemType::kBF16>(a);
  }
}

// Attention over the int8 cache: k_pool/v_pool hold int8 values, scaled per
// (slot, KV head) by k_scales/v_scales; `weights` holds block_size floats.
template <class S>
void VecAttentionI8(const AttentionArgs& a, const float* k_scales, const float* v_scales, float* weights) {
  attention_detail::AttentionWith<S, attention_detail::KvRowI8<S>>(a, k_scales, v_scales, weights);
}

}  // namespace kiln::cpu
