// Paged attention and the KV cache kernels: against a two-pass softmax in
// double precision, the decomposed matmul path, and bit-for-bit independence
// from prefill chunking, batch composition and threads.
#include "backend/cpu/kernels/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/kernels/kv_cache.h"
#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kernels/softmax.h"
#include "core/half.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace attention_tests {

using testing::AllIsas;
using testing::BitEqual;
using testing::ContextFor;
using testing::RandomFloats;

struct CacheSpec {
  DType dtype = DType::kF32;
  int32_t num_blocks = 48;
  int32_t block_size = 16;
  int32_t kv_heads = 2;
  int32_t head_dim = 64;
  int32_t num_heads = 6;
};

// A paged cache with its pools, sequences with shuffled block tables, and the
// K/V rows each sequence's positions hold.
class Fixture {
 public:
  Fixture(const CacheSpec& spec, const std::vector<int32_t>& seq_lens, uint32_t seed) : spec_(spec) {
    const size_t element = spec.dtype == DType::kF32 ? 4 : 2;
    const size_t pool_bytes =
        static_cast<size_t>(spec.num_blocks) * spec.block_size * spec.kv_heads * spec.head_dim * element;
    k_pool_.assign(pool_bytes, 0);
    v_pool_.assign(pool_bytes, 0);
    view_ = {spec.dtype,      k_pool_.data(), v_pool_.data(), spec.num_blocks,
             spec.block_size, spec.kv_heads,  spec.head_dim};
    std::vector<int32_t> free_blocks(static_cast<size_t>(spec.num_blocks));
    std::iota(free_blocks.begin(), free_blocks.end(), 0);
    std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(seed));
    size_t next = 0;
    for (size_t s = 0; s < seq_lens.size(); ++s) {
      const int32_t blocks = (seq_lens[s] + spec.block_size - 1) / spec.block_size;
      tables_.emplace_back(
          free_blocks.begin() + static_cast<std::ptrdiff_t>(next),
          free_blocks.begin() + static_cast<std::ptrdiff_t>(next + static_cast<size_t>(blocks)));
      next += static_cast<size_t>(blocks);
      const size_t row = static_cast<size_t>(spec.kv_heads * spec.head_dim);
      keys_.push_back(
          RandomFloats(static_cast<size_t>(seq_lens[s]) * row, seed + 100 + static_cast<uint32_t>(s)));
      values_.push_back(
          RandomFloats(static_cast<size_t>(seq_lens[s]) * row, seed + 200 + static_cast<uint32_t>(s)));
    }
    for (const auto& t : tables_) {
      table_ptrs_.push_back(t.data());
      table_lens_.push_back(static_cast<int32_t>(t.size()));
    }
  }

  const KvCacheView& view() const { return view_; }
  int64_t row() const { return static_cast<int64_t>(spec_.kv_heads) * spec_.head_dim; }

  int32_t Slot(int32_t seq, int32_t pos) const {
    return tables_[static_cast<size_t>(seq)][static_cast<size_t>(pos / spec_.block_size)] * spec_.block_size +
           pos % spec_.block_size;
  }

  // Writes positions [from, to) of `seq` into the cache.
  void Write(const KernelContext& ctx, int32_t seq, int32_t from, int32_t to) {
    std::vector<int32_t> slots;
    for (int32_t p = from; p < to; ++p) slots.push_back(Slot(seq, p));
    KvWrite(ctx, view_, to - from, slots.data(),
            &keys_[static_cast<size_t>(seq)][static_cast<size_t>(from * row())], row(),
            &values_[static_cast<size_t>(seq)][static_cast<size_t>(from * row())], row());
  }

  AttentionBatch Batch(const std::vector<int32_t>& token_seq, const std::vector<int32_t>& token_pos) const {
    AttentionBatch b;
    b.num_tokens = static_cast<int32_t>(token_seq.size());
    b.token_seq = token_seq.data();
    b.token_pos = token_pos.data();
    b.num_seqs = static_cast<int32_t>(tables_.size());
    b.block_tables = table_ptrs_.data();
    b.block_table_lens = table_lens_.data();
    return b;
  }

  // What the cache holds for (seq, pos, element): the row rounded to its dtype.
  double Stored(const std::vector<std::vector<float>>& rows, int32_t seq, int32_t pos, int64_t e) const {
    const float v = rows[static_cast<size_t>(seq)][static_cast<size_t>(pos * row() + e)];
    switch (spec_.dtype) {
      case DType::kBF16: return Bf16ToF32(F32ToBf16(v));
      case DType::kF16: return F16ToF32(F32ToF16(v));
      default: return v;
    }
  }

  // Two-pass softmax attention in double for one token, all heads.
  std::vector<double> Reference(const float* q, int32_t seq, int32_t pos, float scale, int32_t window,
                                double softcap = 0) const {
    const int32_t d = spec_.head_dim, group = spec_.num_heads / spec_.kv_heads;
    const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
    std::vector<double> out(static_cast<size_t>(spec_.num_heads * d), 0.0);
    for (int32_t h = 0; h < spec_.num_heads; ++h) {
      const int64_t kv = (h / group) * d;
      std::vector<double> scores;
      for (int32_t p = first; p <= pos; ++p) {
        double dot = 0;
        for (int32_t c = 0; c < d; ++c)
          dot += static_cast<double>(q[h * d + c]) * Stored(keys_, seq, p, kv + c);
        scores.push_back(softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale);
      }
      const double m = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - m));
      for (int32_t p = first; p <= pos; ++p) {
        for (int32_t c = 0; c < d; ++c) {
          out[static_cast<size_t>(h * d + c)] +=
              scores[static_cast<size_t>(p - first)] / sum * Stored(values_, seq, p, kv + c);
        }
      }
    }
    return out;
  }

  const CacheSpec& spec() const { return spec_; }
  const std::vector<std::vector<float>>& keys() const { return keys_; }

 private:
  CacheSpec spec_;
  std::vector<uint8_t> k_pool_, v_pool_;
  KvCacheView view_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<const int32_t*> table_ptrs_;
  std::vector<int32_t> table_lens_;
  std::vector<std::vector<float>> keys_, values_;
};

std::vector<float> RunAttention(const KernelContext& ctx, const Fixture& f, const std::vector<int32_t>& seqs,
                                const std::vector<int32_t>& positions, const std::vector<float>& q,
                                int64_t ldq, float scale, int32_t window, float softcap = 0) {
  const CacheSpec& s = f.spec();
  AttentionBatch batch = f.Batch(seqs, positions);
  AttentionParams params{s.num_heads, scale, window, softcap};
  EXPECT_TRUE(CheckAttentionBatch(batch, f.view(), params).ok());
  const int64_t ldo = static_cast<int64_t>(s.num_heads) * s.head_dim;
  std::vector<float> out(seqs.size() * static_cast<size_t>(ldo), -1.0f);
  PagedAttention(ctx, batch, f.view(), params, q.data(), ldq, out.data(), ldo);
  return out;
}

class AttentionTest : public ::testing::TestWithParam<Isa> {};

// Gemma 2's soft-capped scores, cap * tanh(scale * q.k / cap), with a cap
// small enough to bend them: single tokens, and runs of consecutive ones
// (the kernels' several-token path), with and without a window.
TEST_P(AttentionTest, SoftCapMatchesTwoPassSoftmaxInDouble) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (auto [block_size, head_dim] : {std::pair<int32_t, int32_t>{16, 64}, {5, 20}, {32, 128}}) {
    for (int32_t window : {0, 8}) {
      CacheSpec spec;
      spec.dtype = DType::kF32;
      spec.block_size = block_size;
      spec.head_dim = head_dim;
      spec.num_blocks = 200 / block_size + 8;
      const std::vector<int32_t> lens = {37, 70};
      Fixture f(spec, lens, 1);
      const KernelContext ctx = ContextFor(GetParam(), 2);
      std::vector<int32_t> seqs, positions;
      for (int32_t s = 0; s < 2; ++s) f.Write(ctx, s, 0, lens[static_cast<size_t>(s)]);
      for (int32_t p = 0; p < 37; p += 3) seqs.push_back(0), positions.push_back(p);
      for (int32_t p = 60; p < 70; ++p) seqs.push_back(1), positions.push_back(p);
      const int64_t ldq = spec.num_heads * head_dim;
      std::vector<float> q = RandomFloats(seqs.size() * static_cast<size_t>(ldq), 3, -2.0f, 2.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      const float cap = 1.5f;
      std::vector<float> out = RunAttention(ctx, f, seqs, positions, q, ldq, scale, window, cap);
      for (size_t t = 0; t < seqs.size(); ++t) {
        std::vector<double> want =
            f.Reference(&q[t * static_cast<size_t>(ldq)], seqs[t], positions[t], scale, window, cap);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(out[t * static_cast<size_t>(ldq) + i], want[i], 2e-6)
              << "block " << block_size << " head_dim " << head_dim << " window " << window << " token " << t
              << " element " << i;
        }
      }
    }
  }
}

TEST_P(AttentionTest, MatchesTwoPassSoftmaxInDouble) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto [block_size, head_dim] : {std::pair<int32_t, int32_t>{16, 64}, {5, 20}, {1, 8}, {32, 128}}) {
      for (int32_t window : {0, 8}) {
        CacheSpec spec;
        spec.dtype = dtype;
        spec.block_size = block_size;
        spec.head_dim = head_dim;
        spec.num_blocks = 200 / block_size + 8;
        const std::vector<int32_t> lens = {37, 70, 3};
        Fixture f(spec, lens, 1);
        const KernelContext ctx = ContextFor(GetParam(), 2);
        std::vector<int32_t> seqs, positions;
        for (int32_t s = 0; s < 3; ++s) {
          f.Write(ctx, s, 0, lens[static_cast<size_t>(s)]);
          for (int32_t p = 0; p < lens[static_cast<size_t>(s)]; p += 3)
            seqs.push_back(s), positions.push_back(p);
        }
        const int64_t ldq = spec.num_heads * head_dim + 10;  // a slice of a fused QKV row
        std::vector<float> q = RandomFloats(seqs.size() * static_cast<size_t>(ldq), 2, -2.0f, 2.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        std::vector<float> out = RunAttention(ctx, f, seqs, positions, q, ldq, scale, window);
        const int64_t ldo = spec.num_heads * head_dim;
        for (size_t t = 0; t < seqs.size(); ++t) {
          std::vector<double> want =
              f.Reference(&q[t * static_cast<size_t>(ldq)], seqs[t], positions[t], scale, window);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(out[t * static_cast<size_t>(ldo) + i], want[i], 2e-6)
                << DTypeName(dtype) << " block " << block_size << " head_dim " << head_dim << " window "
                << window << " token " << t << " element " << i;
          }
        }
      }
    }
  }
}

// Prefill in chunks of 1, 16 or 64 tokens (cache written chunk by chunk, then
// that chunk's attention) gives the one-shot prefill's outputs bit for bit.
TEST_P(AttentionTest, ChunkedPrefillEqualsOneShotBitForBit) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    CacheSpec spec;
    spec.dtype = dtype;
    const int32_t len = 150;
    const int64_t ldq = spec.num_heads * spec.head_dim, ldo = ldq;
    std::vector<float> q = RandomFloats(static_cast<size_t>(len * ldq), 3);
    const float scale = 0.125f;

    Fixture one_shot(spec, {len}, 4);
    const KernelContext ctx = ContextFor(GetParam(), 2);
    one_shot.Write(ctx, 0, 0, len);
    std::vector<int32_t> all_pos(static_cast<size_t>(len));
    std::iota(all_pos.begin(), all_pos.end(), 0);
    const std::vector<float> full = RunAttention(
        ctx, one_shot, std::vector<int32_t>(static_cast<size_t>(len), 0), all_pos, q, ldq, scale, 0);

    for (int32_t chunk : {1, 16, 64}) {
      Fixture chunked(spec, {len}, 4);
      for (int32_t from = 0; from < len; from += chunk) {
        const int32_t to = std::min(len, from + chunk);
        chunked.Write(ctx, 0, from, to);
        std::vector<int32_t> pos(all_pos.begin() + from, all_pos.begin() + to);
        std::vector<float> q_chunk(q.begin() + from * ldq, q.begin() + to * ldq);
        std::vector<float> out =
            RunAttention(ctx, chunked, std::vector<int32_t>(pos.size(), 0), pos, q_chunk, ldq, scale, 0);
        ASSERT_TRUE(BitEqual(out.data(), &full[static_cast<size_t>(from * ldo)], out.size()))
            << DTypeName(dtype) << " chunk " << chunk << " tokens " << from << ".." << to;
      }
    }
  }
}

// A token's output is the same alone, inside a mixed batch, and on 1, 2 or 3
// threads (3 splits a KV group's query heads between threads when decoding).
TEST_P(AttentionTest, TokenResultIndependentOfBatchAndThreads) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  CacheSpec spec;
  spec.dtype = DType::kF16;
  Fixture f(spec, {90, 40, 17}, 5);
  const KernelContext ctx1 = ContextFor(GetParam(), 1);
  for (int32_t s = 0; s < 3; ++s)
    f.Write(ctx1, s, 0, std::vector<int32_t>{90, 40, 17}[static_cast<size_t>(s)]);
  const std::vector<int32_t> seqs = {0, 1, 2, 0, 0, 1};
  const std::vector<int32_t> positions = {89, 39, 16, 10, 50, 0};
  const int64_t ldq = spec.num_heads * spec.head_dim;
  std::vector<float> q = RandomFloats(seqs.size() * static_cast<size_t>(ldq), 6);
  const std::vector<float> batch1 = RunAttention(ctx1, f, seqs, positions, q, ldq, 0.125f, 0);
  for (int threads : {2, 3}) {
    KernelContext ctx = ctx1;
    ctx.pool = &DefaultThreadPool(threads);
    ASSERT_TRUE(BitEqual(RunAttention(ctx, f, seqs, positions, q, ldq, 0.125f, 0).data(), batch1.data(),
                         batch1.size()))
        << threads << " threads";
    for (size_t t = 0; t < seqs.size(); ++t) {
      std::vector<float> q_one(q.begin() + static_cast<std::ptrdiff_t>(t * static_cast<size_t>(ldq)),
                               q.begin() + static_cast<std::ptrdiff_t>((t + 1) * static_cast<size_t>(ldq)));
      std::vector<float> alone = RunAttention(ctx, f, {seqs[t]}, {positions[t]}, q_one, ldq, 0.125f, 0);
      ASSERT_TRUE(BitEqual(alone.data(), &batch1[t * static_cast<size_t>(ldq)], alone.size()))
          << "token " << t << " alone on " << threads << " threads";
    }
  }
}

// Consecutive tokens of one sequence (a verification pass's drafted tokens)
// are attended to together, in runs of up to kMaxAttentionTokens: each
// token's output is bit for bit the one it gets alone, for runs that cross
// a block's edge, with a sliding window, and for the tiny models' heads of
// 16 and 32 elements as well as 64; and it is right.
TEST_P(AttentionTest, RunsOfTokensEqualTokensAloneBitForBit) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (int32_t head_dim : {16, 32, 64}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (int32_t window : {0, 20}) {
        CacheSpec spec;
        spec.dtype = dtype;
        spec.head_dim = head_dim;
        spec.num_heads = 4;
        Fixture f(spec, {75, 30}, 7);
        const KernelContext ctx = ContextFor(GetParam(), 2);
        f.Write(ctx, 0, 0, 75);
        f.Write(ctx, 1, 0, 30);
        // Sequence 0's positions 58..69 (a run of 8, then 4, across the
        // block edge at 64), one token of sequence 1 and a gap in between.
        std::vector<int32_t> seqs, positions;
        for (int32_t p = 58; p < 70; ++p) {
          seqs.push_back(0);
          positions.push_back(p);
          if (p == 61) {
            seqs.push_back(1);
            positions.push_back(29);
          }
        }
        seqs.push_back(0);
        positions.push_back(74);
        const int64_t ld = spec.num_heads * spec.head_dim;
        const std::vector<float> q = RandomFloats(seqs.size() * static_cast<size_t>(ld), 8);
        const std::vector<float> together = RunAttention(ctx, f, seqs, positions, q, ld, 0.25f, window);
        for (size_t t = 0; t < seqs.size(); ++t) {
          const auto row = static_cast<std::ptrdiff_t>(t * static_cast<size_t>(ld));
          std::vector<float> q_one(q.begin() + row, q.begin() + row + ld);
          const std::vector<float> alone = RunAttention(ctx, f, {seqs[t]}, {positions[t]}, q_one, ld, 0.25f, window);
          ASSERT_TRUE(BitEqual(alone.data(), &together[static_cast<size_t>(row)], alone.size()))
              << "head_dim " << head_dim << " " << DTypeName(dtype) << " window " << window << " token " << t;
          const std::vector<double> want = f.Reference(q_one.data(), seqs[t], positions[t], 0.25f, window);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(together[static_cast<size_t>(row) + i], want[i], 1e-4) << "token " << t << " element " << i;
          }
        }
      }
    }
  }
}

// Attention decomposed into gather, matmul, masked softmax and matmul gives
// the fused kernel's result.
TEST_P(AttentionTest, DecomposedPathAgreesWithPagedAttention) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  CacheSpec spec;
  spec.dtype = DType::kBF16;
  const int32_t len = 45, window = 20;
  Fixture f(spec, {len}, 7);
  const KernelContext ctx = ContextFor(GetParam(), 2);
  f.Write(ctx, 0, 0, len);
  const int32_t heads = spec.num_heads, d = spec.head_dim, group = heads / spec.kv_heads;
  const int64_t row = f.row(), ldq = heads * d;
  // Queries for the last 9 positions.
  std::vector<int32_t> positions;
  for (int32_t p = len - 9; p < len; ++p) positions.push_back(p);
  const int64_t tokens = static_cast<int64_t>(positions.size());
  std::vector<float> q = RandomFloats(static_cast<size_t>(tokens * ldq), 8);
  const float scale = 1.0f / 8.0f;
  const std::vector<float> fused =
      RunAttention(ctx, f, std::vector<int32_t>(positions.size(), 0), positions, q, ldq, scale, window);

  std::vector<float> keys(static_cast<size_t>(len * row)), values(keys.size());
  GatherKv(ctx, f.view(), f.Batch({0}, {0}).block_tables[0], len, keys.data(), row, values.data(), row);
  for (int32_t p = 0; p < len; ++p) {
    for (int64_t e = 0; e < row; ++e)
      ASSERT_EQ(keys[static_cast<size_t>(p * row + e)], f.Stored(f.keys(), 0, p, e));
  }
  // scores[h][t][p] = q_t,h . k_p,h/group
  std::vector<float> scores(static_cast<size_t>(heads * tokens * len));
  MatMul(ctx, heads, tokens, len, d, {q.data(), ldq, d}, {keys.data(), row, d}, true,
         {scores.data(), len, tokens * len}, group);
  std::vector<int32_t> begin, end;
  for (int32_t h = 0; h < heads; ++h) {
    for (int32_t p : positions) begin.push_back(std::max(0, p - window + 1)), end.push_back(p + 1);
  }
  MaskedSoftmax(ctx, heads * tokens, len, scores.data(), len, scale, begin.data(), end.data(), scores.data(),
                len);
  std::vector<float> out(static_cast<size_t>(tokens * ldq));
  MatMul(ctx, heads, tokens, d, len, {scores.data(), len, tokens * len}, {values.data(), row, d}, false,
         {out.data(), ldq, d}, group);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], fused[i], 2e-6) << "element " << i;
}

TEST_P(AttentionTest, KvWriteConvertsAndSkipsNegativeSlots) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    CacheSpec spec;
    spec.dtype = dtype;
    spec.num_blocks = 2;
    spec.block_size = 4;
    Fixture f(spec, {}, 9);
    const int64_t row = f.row(), ld = row + 3;
    std::vector<float> k = RandomFloats(static_cast<size_t>(3 * ld), 10), v = RandomFloats(k.size(), 11);
    const std::vector<int32_t> slots = {5, -1, 0};
    KvWrite(ContextFor(GetParam(), 2), f.view(), 3, slots.data(), k.data(), ld, v.data(), ld);
    std::vector<float> back_k(static_cast<size_t>(8 * row)), back_v(back_k.size());
    const int32_t table[2] = {0, 1};
    GatherKv(ContextFor(GetParam(), 1), f.view(), table, 8, back_k.data(), row, back_v.data(), row);
    auto rounded = [&](float x) -> float {
      return dtype == DType::kBF16  ? Bf16ToF32(F32ToBf16(x))
             : dtype == DType::kF16 ? F16ToF32(F32ToF16(x))
                                    : x;
    };
    for (int64_t e = 0; e < row; ++e) {
      EXPECT_EQ(back_k[static_cast<size_t>(5 * row + e)], rounded(k[static_cast<size_t>(e)]));
      EXPECT_EQ(back_v[static_cast<size_t>(0 * row + e)], rounded(v[static_cast<size_t>(2 * ld + e)]));
      for (int32_t slot : {1, 2, 3, 4, 6, 7}) EXPECT_EQ(back_k[static_cast<size_t>(slot * row + e)], 0.0f);
    }
  }
}

// A window pool's tables: the entries wholly before the window of every
// token of the pass are -1 (released). Attention never reads them: the
// output is the same, bit for bit, as with every block present, for single
// tokens and runs; an entry a token still sees may not be -1.
TEST_P(AttentionTest, ReleasedEntriesBeforeTheWindowAreNeverRead) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    CacheSpec spec;
    spec.dtype = dtype;
    spec.block_size = 4;
    spec.head_dim = 32;
    spec.num_blocks = 64;
    const int32_t window = 9;
    Fixture f(spec, {70, 45}, 3);
    const KernelContext ctx = ContextFor(GetParam(), 2);
    f.Write(ctx, 0, 0, 64);
    f.Write(ctx, 1, 0, 45);
    // Sequence 0: a run at 60..63 (sees 52..63); sequence 1: one token at
    // 44 (sees 36..44).
    const std::vector<int32_t> seqs = {0, 0, 0, 0, 1}, positions = {60, 61, 62, 63, 44};
    const int64_t ldq = static_cast<int64_t>(spec.num_heads) * spec.head_dim;
    const std::vector<float> q = RandomFloats(seqs.size() * static_cast<size_t>(ldq), 5, -1.0f, 1.0f);
    AttentionParams params{spec.num_heads, 0.2f, window, 0};
    AttentionBatch batch = f.Batch(seqs, positions);
    std::vector<float> whole(seqs.size() * static_cast<size_t>(ldq), -1.0f);
    PagedAttention(ctx, batch, f.view(), params, q.data(), ldq, whole.data(), ldq);

    std::vector<std::vector<int32_t>> released(2);
    const int32_t first_seen[2] = {52, 36};
    for (int32_t s = 0; s < 2; ++s) {
      released[static_cast<size_t>(s)].assign(batch.block_tables[s], batch.block_tables[s] + batch.block_table_lens[s]);
      for (int32_t i = 0; (i + 1) * spec.block_size <= first_seen[s]; ++i) released[static_cast<size_t>(s)][static_cast<size_t>(i)] = -1;
    }
    const int32_t* tables[2] = {released[0].data(), released[1].data()};
    batch.block_tables = tables;
    Status ok = CheckAttentionBatch(batch, f.view(), params);
    EXPECT_TRUE(ok.ok()) << ok.ToString();
    std::vector<float> out(whole.size(), -1.0f);
    PagedAttention(ctx, batch, f.view(), params, q.data(), ldq, out.data(), ldq);
    EXPECT_EQ(out, whole) << DTypeName(dtype);
    for (size_t t = 0; t < seqs.size(); ++t) {
      const std::vector<double> want = f.Reference(&q[t * static_cast<size_t>(ldq)], seqs[t], positions[t], 0.2f, window);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(out[t * static_cast<size_t>(ldq) + i], want[i], 1e-5) << "token " << t << " element " << i;
      }
    }

    // Block 12 holds 48..51 (sequence 0 sees 52 on: it may go); block 13
    // holds 52..55, which the token at 60 sees.
    EXPECT_EQ(released[0][12], -1);
    released[0][13] = -1;
    EXPECT_EQ(CheckAttentionBatch(batch, f.view(), params).code(), StatusCode::kOutOfRange);
    // Without a window every entry is seen.
    released[0][13] = f.Batch(seqs, positions).block_tables[0][13];
    EXPECT_EQ(CheckAttentionBatch(batch, f.view(), AttentionParams{spec.num_heads, 0.2f, 0, 0}).code(),
              StatusCode::kOutOfRange);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

// The decomposed path's gather: a released (-1) entry gathers zeros, which
// the mask gives no weight; the other rows are the cache's.
TEST(GatherKv, ReleasedEntriesGatherZeros) {
  CacheSpec spec;
  spec.block_size = 4;
  Fixture f(spec, {14}, 9);
  const KernelContext ctx = ContextFor(Isa::kScalar, 1);
  f.Write(ctx, 0, 0, 14);
  const std::vector<int32_t> seqs = {0}, positions = {13};
  const AttentionBatch batch = f.Batch(seqs, positions);
  std::vector<int32_t> table(batch.block_tables[0], batch.block_tables[0] + 4);
  table[0] = table[1] = -1;
  const int64_t row = f.row();
  std::vector<float> k(static_cast<size_t>(14 * row), -1.0f), v(k.size(), -1.0f);
  GatherKv(ctx, f.view(), table.data(), 14, k.data(), row, v.data(), row);
  for (int64_t p = 0; p < 14; ++p) {
    for (int64_t e = 0; e < row; ++e) {
      const size_t at = static_cast<size_t>(p * row + e);
      const float want_k = p < 8 ? 0.0f : f.keys()[0][at];
      ASSERT_EQ(k[at], want_k) << "position " << p;
      if (p < 8) {
        ASSERT_EQ(v[at], 0.0f) << "position " << p;
      }
    }
  }
}

TEST(CheckAttentionBatch, RejectsWhatWouldReadOutsideTheCache) {
  CacheSpec spec;
  spec.num_blocks = 4;
  Fixture f(spec, {20, 3}, 12);
  AttentionParams params{spec.num_heads, 0.125f, 0};
  std::vector<int32_t> seqs = {0, 1}, positions = {19, 2};
  EXPECT_TRUE(CheckAttentionBatch(f.Batch(seqs, positions), f.view(), params).ok());

  auto code = [&](std::vector<int32_t> s, std::vector<int32_t> p, AttentionParams prm) {
    return CheckAttentionBatch(f.Batch(s, p), f.view(), prm).code();
  };
  EXPECT_EQ(code({2}, {0}, params), StatusCode::kOutOfRange);   // no such sequence
  EXPECT_EQ(code({0}, {-1}, params), StatusCode::kOutOfRange);  // negative position
  EXPECT_EQ(code({0}, {32}, params), StatusCode::kOutOfRange);  // beyond the block table
  EXPECT_EQ(code({1}, {16}, params), StatusCode::kOutOfRange);
  EXPECT_EQ(code({0}, {0}, AttentionParams{5, 0.1f, 0}), StatusCode::kInvalidArgument);  // 5 heads over 2 kv
  EXPECT_EQ(code({0}, {0}, AttentionParams{6, 0.1f, -1}), StatusCode::kInvalidArgument);

  AttentionBatch bad = f.Batch(seqs, positions);
  const int32_t wild_table[2] = {1, 9};
  const int32_t* tables[2] = {wild_table, bad.block_tables[1]};
  bad.block_tables = tables;
  Status s = CheckAttentionBatch(bad, f.view(), params);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("block 9"), std::string::npos) << s.message();

  KvCacheView no_pool = f.view();
  no_pool.v = nullptr;
  EXPECT_FALSE(CheckKvCache(no_pool).ok());
  KvCacheView q8 = f.view();
  q8.dtype = DType::kQ8_0;
  EXPECT_EQ(CheckKvCache(q8).code(), StatusCode::kUnsupported);
}

}  // namespace attention_tests
}  // namespace kiln::cpu
