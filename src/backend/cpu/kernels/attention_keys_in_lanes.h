// Paged attention over a float cache (f32, f16, bf16) with the keys in
// vector lanes: a chunk of L keys of a block (L = S::kLanes) is transposed
// once into `kt` ([head_dim][L]), and each query row's scores for the chunk
// are then one vector, q[c] broadcast times kt[c] summed over c. So a
// row's scores need no reduction across lanes, and its maximum,
// exponentials and sum are one vector each, where a key at a time (Dot16's
// 45-instruction reduction per 16 keys, a scalar sum per key) spent more
// on them than on the products: the transposition is paid once a chunk for
// every query head and token of the work item.
//
// Deterministic as attention_simd.h requires: a row's arithmetic is fixed
// by its position, the cache and L alone. Its score for key j is the sum of
// q[c] k_j[c] over even c in one chain and odd c in another, then added,
// times the scale; chunks are aligned to the block (so to absolute
// positions), and the online softmax steps once a chunk. Rows go through
// in tiles of up to kRowTile sharing each kt vector, but no row's
// arithmetic depends on the others of its tile.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/kernels/attention_simd.h"
#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/kv_prefetch.h"
#include "backend/cpu/kernels/simd_math.h"

namespace kiln::cpu {
namespace attention_detail {

// Query rows scored together against one chunk of keys, 2 chains each: 16
// FMA chains with 32 vector registers, 8 with 16. A tile's chains alone
// must cover the FMA latency on both pipes: the softmax after them leaves
// the next tile's products too far ahead for the core to start early (4
// rows with 32 registers ran the 5-token scores at a third of the FMA peak).
template <class S>
inline constexpr int kRowTile = S::kLanes >= 16 ? 8 : (S::kLanes < 4 ? S::kLanes : 4);

// kt[c * L + lane] = element c of key row lane (rows[lane], or zero where
// rows[lane] is null), for c in [c0, c0 + L): L rows of L elements
// transposed in registers where this build has the shuffles for it.
template <class S, class Row>
inline void TransposeKeyColumns(const typename Row::T* const* rows, int c0, float* kt) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  V r[L];
  for (int i = 0; i < L; ++i) r[i] = rows[i] != nullptr ? Row::Load(rows[i] + c0) : S::Zero();
#if defined(__AVX512F__)
  if constexpr (L == 16 && sizeof(V) == 64) {
    // Pairs of rows interleaved, then fours: u[4g + e] holds, in each
    // 128-bit lane l, element 4l + e of rows 4g .. 4g + 3.
    __m512 t[16], u[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; ++g) {
      u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
      u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
      u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
      u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    // Lane l of the four groups side by side: element 4l + e of all rows.
    for (int e = 0; e < 4; ++e) {
      const __m512 even_a = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88);
      const __m512 odd_a = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xDD);
      const __m512 even_b = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
      const __m512 odd_b = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xDD);
      _mm512_storeu_ps(kt + (c0 + e) * 16, _mm512_shuffle_f32x4(even_a, even_b, 0x88));
      _mm512_storeu_ps(kt + (c0 + 4 + e) * 16, _mm512_shuffle_f32x4(odd_a, odd_b, 0x88));
      _mm512_storeu_ps(kt + (c0 + 8 + e) * 16, _mm512_shuffle_f32x4(even_a, even_b, 0xDD));
      _mm512_storeu_ps(kt + (c0 + 12 + e) * 16, _mm512_shuffle_f32x4(odd_a, odd_b, 0xDD));
    }
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (L == 8 && sizeof(V) == 32) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; ++g) {
      u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
      u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
      u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
      u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int e = 0; e < 4; ++e) {
      _mm256_storeu_ps(kt + (c0 + e) * 8, _mm256_permute2f128_ps(u[e], u[4 + e], 0x20));
      _mm256_storeu_ps(kt + (c0 + 4 + e) * 8, _mm256_permute2f128_ps(u[e], u[4 + e], 0x31));
    }
    return;
  }
#endif
  alignas(64) float column[L];
  for (int i = 0; i < L; ++i) {
    S::Store(column, r[i]);
    for (int c = 0; c < L; ++c) kt[(c0 + c) * L + i] = column[c];
  }
}

// The keys rows[lane] (null: none, zeros) transposed into kt for all d
// elements; a last part of fewer than L elements goes one row at a time.
template <class S, class Row>
inline void TransposeKeys(const typename Row::T* const* rows, int d, float* kt) {
  constexpr int L = S::kLanes;
  int c0 = 0;
  for (; c0 + L <= d; c0 += L) TransposeKeyColumns<S, Row>(rows, c0, kt);
  if (c0 == d) return;
  alignas(64) float column[L];
  for (int i = 0; i < L; ++i) {
    S::Store(column, rows[i] != nullptr ? Row::LoadPart(rows[i] + c0, d - c0) : S::Zero());
    for (int c = c0; c < d; ++c) kt[c * L + i] = column[c - c0];
  }
}

// The scaled scores of R query rows (q[r]) against the chunk in kt: row r's
// lane i is key i's score. Even and odd elements in separate chains.
template <class S, int R>
inline void ChunkScores(const float* const* q, const float* kt, int d, float scale, typename S::V* scores) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  V even[R], odd[R];
  for (int r = 0; r < R; ++r) even[r] = odd[r] = S::Zero();
  int c = 0;
  for (; c + 2 <= d; c += 2) {
    const V k0 = S::Load(kt + c * L), k1 = S::Load(kt + (c + 1) * L);
    for (int r = 0; r < R; ++r) {
      even[r] = S::Fma(S::Set1(q[r][c]), k0, even[r]);
      odd[r] = S::Fma(S::Set1(q[r][c + 1]), k1, odd[r]);
    }
  }
  if (c < d) {
    const V k0 = S::Load(kt + c * L);
    for (int r = 0; r < R; ++r) even[r] = S::Fma(S::Set1(q[r][c]), k0, even[r]);
  }
  const V s = S::Set1(scale);
  for (int r = 0; r < R; ++r) scores[r] = S::Mul(S::Add(even[r], odd[r]), s);
}

// ChunkScores for the `count` rows of a tile (1 to kRowTile<S>).
template <class S, int R = 1>
inline void TileScores(int count, const float* const* q, const float* kt, int d, float scale,
                       typename S::V* s) {
  if constexpr (R < kRowTile<S>) {
    if (count == R) return ChunkScores<S, R>(q, kt, d, scale, s);
    return TileScores<S, R + 1>(count, q, kt, d, scale, s);
  } else {
    ChunkScores<S, R>(q, kt, d, scale, s);
  }
}

template <class S, class Row>
void AttentionKeysInLanes(const AttentionArgs& a) {
  using T = typename Row::T;
  using V = typename S::V;
  constexpr int L = S::kLanes;
  const int heads = a.h_end - a.h_begin;
  const int tokens = a.tokens > 1 ? a.tokens : 1;
  const int rows = heads * tokens;  // row r: token r / heads, head h_begin + r % heads
  const int d = a.head_dim;
  const int bs = a.block_size;
  float* kt = a.scratch;                                   // [d][L]
  float* weights = kt + static_cast<int64_t>(d) * L;       // [rows][bs]: the chunk's softmax weights
  float* acc = weights + static_cast<int64_t>(rows) * bs;  // [rows][d]
  float* running_max = acc + static_cast<int64_t>(rows) * d;
  float* running_sum = running_max + rows;
  float* corrections = running_sum + rows;  // [chunks of a block][rows]: each chunk's rescaling
  for (int i = 0; i < rows; ++i) {
    running_max[i] = -std::numeric_limits<float>::infinity();
    running_sum[i] = 0.0f;
    for (int c = 0; c < d; ++c) acc[static_cast<int64_t>(i) * d + c] = 0.0f;
  }
  auto q_row = [&](int r) {
    return a.q + (r / heads) * a.ldq + static_cast<int64_t>(a.h_begin + r % heads) * d;
  };
  // Lane i as a float, to mask lanes by comparison on every instruction set.
  alignas(64) float lane_index[L];
  for (int i = 0; i < L; ++i) lane_index[i] = static_cast<float>(i);
  const V lanes = S::Load(lane_index);
  const V minus_inf = S::Set1(-std::numeric_limits<float>::infinity());
  constexpr int kRowTile = attention_detail::kRowTile<S>;
  static_assert(kRowTile <= L);
  const bool values_together = d % (kValueVecs<S> * L) == 0;

  const int64_t row_stride = static_cast<int64_t>(a.kv_heads) * d;
  const int64_t block_elems = static_cast<int64_t>(bs) * row_stride;
  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
  const int last_block = (a.last_pos + tokens - 1) / bs;
  int j0s[kMaxAttentionTokens], j1s[kMaxAttentionTokens];  // each token's keys in the chunk; none if j0 > j1
  int first_keys[kMaxAttentionTokens];
  for (int t = 0; t < tokens; ++t) first_keys[t] = AttentionFirstPos(a, t);
  for (int b = a.first_pos / bs; b <= last_block; ++b) {
    const int block_start = b * bs;
    const int64_t block_offset = static_cast<int64_t>(a.block_table[b]) * block_elems + a.kv_head * d;
    const T* k = k_pool + block_offset;
    const T* v = v_pool + block_offset;
    const bool next = b < last_block;
    const int64_t next_offset = next ? a.block_table[b + 1] * block_elems + a.kv_head * d : 0;
    const int chunks = (bs + L - 1) / L;
    const int tiles = (rows + kRowTile - 1) / kRowTile;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const int c_begin = chunk * L;
      const int c_end = c_begin + L < bs ? c_begin + L : bs;  // keys [c_begin, c_end) of the block
      int lo = c_end, hi = c_begin - 1;
      for (int t = 0; t < tokens; ++t) {
        const int first = first_keys[t] - block_start, last = a.last_pos + t - block_start;
        j0s[t] = first > c_begin ? first : c_begin;
        j1s[t] = last < c_end - 1 ? last : c_end - 1;
        if (j0s[t] <= j1s[t]) {
          lo = j0s[t] < lo ? j0s[t] : lo;
          hi = j1s[t] > hi ? j1s[t] : hi;
        }
      }
      if (lo > hi) continue;
      float* chunk_corrections = corrections + static_cast<int64_t>(chunk) * rows;
      // Only the keys some token sees are read: the others may never have
      // been written.
      const T* key_rows[L];
      for (int i = 0; i < L; ++i) {
        const int j = c_begin + i;
        key_rows[i] = j >= lo && j <= hi ? k + j * row_stride : nullptr;
      }
      TransposeKeys<S, Row>(key_rows, d, kt);

      for (int tile = 0; tile < tiles; ++tile) {
        // The next block's rows, in parts between the tiles' work: all at
        // once, the requests outnumbered the line fill buffers and stalled.
        if (next) {
          constexpr int64_t kElem = sizeof(T);
          const int step = chunk * tiles + tile, steps = chunks * tiles;
          PrefetchKvRows(k_pool, v_pool, next_offset * kElem, row_stride * kElem, d * kElem,
                         bs * step / steps, bs * (step + 1) / steps);
        }
        const int r0 = tile * kRowTile;
        const int count = rows - r0 < kRowTile ? rows - r0 : kRowTile;
        const float* tile_q[kRowTile];
        for (int i = 0; i < count; ++i) tile_q[i] = q_row(r0 + i);
        V s[kRowTile];
        TileScores<S>(count, tile_q, kt, d, a.scale, s);
        // Each row's keys masked and its new maximum; then the tile's
        // rescaling factors in one vector; then the weights and their sum.
        bool sees[kRowTile];
        alignas(64) float shift[L] = {};
        float new_max[kRowTile];
        for (int i = 0; i < count; ++i) {
          const int r = r0 + i;
          const int t = r / heads;
          sees[i] = j0s[t] <= j1s[t];
          if (!sees[i]) continue;
          V x = s[i];
          if (a.softcap > 0) x = S::Mul(VecTanh<S>(S::Mul(x, S::Set1(1.0f / a.softcap))), S::Set1(a.softcap));
          if (j0s[t] != c_begin || j1s[t] != c_begin + L - 1) {  // keys the token does not see weigh nothing
            x = S::Select(S::Less(lanes, S::Set1(static_cast<float>(j0s[t] - c_begin))), minus_inf, x);
            x = S::Select(S::Less(S::Set1(static_cast<float>(j1s[t] - c_begin)), lanes), minus_inf, x);
          }
          s[i] = x;
          const float chunk_max = S::ReduceMax(x);
          new_max[i] = chunk_max > running_max[r] ? chunk_max : running_max[r];
          shift[i] = running_max[r] - new_max[i];  // -inf before the first chunk
        }
        // exp(shift), 0 where it would be below the normal floats (and for
        // the first chunk, whose earlier sums are all zero).
        const V shifts = S::Load(shift);
        const V scale_old = S::Select(S::Less(shifts, S::Set1(-87.0f)), S::Zero(), VecExp<S>(shifts));
        alignas(64) float scale_old_lanes[L];
        S::Store(scale_old_lanes, scale_old);
        for (int i = 0; i < count; ++i) {
          if (!sees[i]) continue;
          const int r = r0 + i;
          // exp(-inf) of the masked lanes: VecExp's smallest value, not 0.
          const V p = S::Select(S::Less(s[i], S::Set1(-std::numeric_limits<float>::max())), S::Zero(),
                                VecExp<S>(S::Sub(s[i], S::Set1(new_max[i]))));
          running_sum[r] = running_sum[r] * scale_old_lanes[i] + S::ReduceAdd(p);
          running_max[r] = new_max[i];
          chunk_corrections[r] = scale_old_lanes[i];
          S::StorePart(weights + static_cast<int64_t>(r) * bs + c_begin, p, c_end - c_begin);
        }
      }
    }

    // The block's values, weighted: only the keys each token sees, in one
    // pass that rescales the sums where each chunk begins.
    bool same = true;  // every token sees the same keys of this block
    for (int t = 0; t < tokens; ++t) {
      const int first = first_keys[t] - block_start, last = a.last_pos + t - block_start;
      j0s[t] = first > 0 ? first : 0;
      j1s[t] = last < bs - 1 ? last : bs - 1;
      same = same && j0s[t] == j0s[0] && j1s[t] == j1s[0];
    }
    const Corrections block_corrections{corrections, rows, L};
    if (!values_together) {
      for (int r = 0; r < rows; ++r) {
        const int t = r / heads;
        if (j0s[t] > j1s[t]) continue;
        AccumulateValues<S, Row>(acc + static_cast<int64_t>(r) * d, block_corrections.Rows(r),
                                 weights + static_cast<int64_t>(r) * bs, v, row_stride, j0s[t], j1s[t], d);
      }
    } else {
      AccumulateTokensValues<S, Row>(acc, block_corrections, weights, bs, v, row_stride, j0s, j1s, same, d,
                                     heads, tokens);
    }
  }

  StoreNormalizedRows<S>(a, acc, running_sum, rows, heads);
}

}  // namespace attention_detail

// Attention over a float cache (AttentionArgs; kv_type says which).
template <class S>
void VecAttention(const AttentionArgs& a) {
  using attention_detail::AttentionKeysInLanes;
  using attention_detail::KvRow;
  switch (a.kv_type) {
    case ElemType::kF32: return AttentionKeysInLanes<S, KvRow<S, ElemType::kF32>>(a);
    case ElemType::kF16: return AttentionKeysInLanes<S, KvRow<S, ElemType::kF16>>(a);
    case ElemType::kBF16: return AttentionKeysInLanes<S, KvRow<S, ElemType::kBF16>>(a);
  }
}

}  // namespace kiln::cpu
