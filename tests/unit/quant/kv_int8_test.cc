// The int8 KV cache: layout sizes (scales included), per (token, head)
// quantization on write, dequantization on gather, attention over it on every
// ISA against a double-precision reference on the dequantized values, chunked
// prefill and thread independence, and whole models with an int8 cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/kernels/kv_cache.h"
#include "backend/cpu/kernels/paged_attention.h"
#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
#include "core/thread_pool.h"
#include "format/weight_store.h"
#include "testing/model_runner_for_tests.h"
#include "testing/test_paths.h"

namespace kiln {
namespace kv_int8_tests {

using cpu::Isa;
using cpu::IsaName;

TEST(KvInt8Layout, TokenBytesIncludeOneScalePerHead) {
  KvCacheLayout l;
  l.num_layers = 4;
  l.block_size = 16;
  l.num_kv_heads = 2;
  l.head_dim = 64;
  l.dtype = DType::kI8;
  EXPECT_EQ(l.TokenElementBytes(), 128);
  EXPECT_EQ(l.TokenScaleBytes(), 8);
  EXPECT_EQ(l.TokenBytes(), 136);
  EXPECT_EQ(l.BlockBytes(), 2 * 4 * 16 * 136);
  EXPECT_EQ(KvBlocksForBytes(l, 2 * 4 * 16 * 136 * 10 + 5), 10);
  l.dtype = DType::kF32;
  EXPECT_EQ(l.TokenBytes(), 512);
  EXPECT_EQ(l.TokenScaleBytes(), 0);

  l.dtype = DType::kI8;
  l.num_blocks = 3;
  auto cache = KvCache::Allocate(l, HostMemory());
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ((*cache)->TotalBytes(), 3 * l.BlockBytes());
  for (int64_t layer = 0; layer < 4; ++layer) {
    EXPECT_NE((*cache)->key_scales(layer), nullptr);
    EXPECT_NE((*cache)->value_scales(layer), nullptr);
  }
  l.dtype = DType::kBF16;
  auto plain = KvCache::Allocate(l, HostMemory());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->key_scales(0), nullptr);
  l.dtype = DType::kQ8_0;
  EXPECT_FALSE(KvCache::Allocate(l, HostMemory()).ok());
}

// An int8 cache view over owned pools.
struct Int8Cache {
  Int8Cache(int32_t blocks, int32_t block_size, int32_t heads, int32_t dim)
      : k(static_cast<size_t>(blocks * block_size * heads * dim)),
        v(k.size()),
        ks(static_cast<size_t>(blocks * block_size * heads), -1.0f),
        vs(ks.size(), -1.0f) {
    view.dtype = DType::kI8;
    view.k = k.data();
    view.v = v.data();
    view.k_scale = ks.data();
    view.v_scale = vs.data();
    view.num_blocks = blocks;
    view.block_size = block_size;
    view.kv_heads = heads;
    view.head_dim = dim;
  }
  std::vector<int8_t> k, v;
  std::vector<float> ks, vs;
  cpu::KvCacheView view;
};

std::vector<float> Normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(KvInt8Write, QuantizesPerTokenAndHeadAndGathersBack) {
  Int8Cache c(4, 4, 2, 24);
  ASSERT_TRUE(cpu::CheckKvCache(c.view).ok());
  const int64_t row = 48, tokens = 5;
  auto k = Normal(static_cast<size_t>(tokens * row), 1, 3.0f);
  auto v = Normal(static_cast<size_t>(tokens * row), 2, 0.1f);
  std::fill(k.begin() + 2 * row, k.begin() + 2 * row + 24, 0.0f);  // token 2, head 0: all zero
  std::vector<int32_t> slots = {3, 0, 7, -1, 12};
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!cpu::IsaAvailable(isa)) continue;
    cpu::KernelContext ctx;
    ctx.isa = isa;
    ctx.pool = &DefaultThreadPool(2);
    std::fill(c.ks.begin(), c.ks.end(), -1.0f);
    cpu::KvWrite(ctx, c.view, tokens, slots.data(), k.data(), row, v.data(), row);
    // Token 3 (slot -1) wrote nothing: slot 1's scales are untouched.
    EXPECT_EQ(c.ks[2], -1.0f);
    for (int64_t t = 0; t < tokens; ++t) {
      if (slots[static_cast<size_t>(t)] < 0) continue;
      const int64_t slot = slots[static_cast<size_t>(t)];
      for (int64_t h = 0; h < 2; ++h) {
        float amax = 0;
        for (int64_t i = 0; i < 24; ++i) amax = std::max(amax, std::fabs(k[static_cast<size_t>(t * row + h * 24 + i)]));
        const float scale = c.ks[static_cast<size_t>(slot * 2 + h)];
        EXPECT_EQ(scale, amax / 127.0f) << IsaName(isa) << " token " << t << " head " << h;
        for (int64_t i = 0; i < 24; ++i) {
          const float x = k[static_cast<size_t>(t * row + h * 24 + i)];
          const float back = scale * c.k[static_cast<size_t>(slot * row + h * 24 + i)];
          EXPECT_LE(std::fabs(back - x), 0.5f * scale * 1.0001f + 1e-30f);
        }
      }
    }
    EXPECT_EQ(c.ks[static_cast<size_t>(7 * 2)], 0.0f);  // the zero head
    // Gather: positions 0..2 of a sequence whose table is {0, 1, 3} hold slots 0, 1, 2.
    std::vector<int32_t> table = {1, 0, 3};  // position p -> slot table[p / 4] * 4 + p % 4
    std::vector<float> kout(static_cast<size_t>(8 * row)), vout(kout.size());
    cpu::GatherKv(ctx, c.view, table.data(), 8, kout.data(), row, vout.data(), row);
    // Position 3 is slot 7 (token 2), position 4 is slot 0 (token 1).
    for (int64_t i = 0; i < row; ++i) {
      EXPECT_EQ(kout[static_cast<size_t>(3 * row + i)], c.ks[static_cast<size_t>(7 * 2 + i / 24)] *
                                                              static_cast<float>(c.k[static_cast<size_t>(7 * row + i)]));
      EXPECT_EQ(vout[static_cast<size_t>(4 * row + i)], c.vs[static_cast<size_t>(0 * 2 + i / 24)] *
                                                              static_cast<float>(c.v[static_cast<size_t>(0 * row + i)]));
    }
  }
  Int8Cache missing(2, 4, 1, 8);
  missing.view.v_scale = nullptr;
  EXPECT_FALSE(cpu::CheckKvCache(missing.view).ok());
}

// Attention over an int8 cache: two sequences in shuffled blocks.
class Int8Attention : public ::testing::TestWithParam<Isa> {
 protected:
  static constexpr int32_t kBlocks = 12, kBlockSize = 8, kKvHeads = 2, kDim = 40, kHeads = 6;
  Int8Attention() : cache_(kBlocks, kBlockSize, kKvHeads, kDim) {
    std::vector<int32_t> ids(kBlocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(4));
    tables_ = {{ids[0], ids[1], ids[2], ids[3], ids[4]}, {ids[5], ids[6], ids[7]}};
    lens_ = {37, 20};
    for (int s = 0; s < 2; ++s) {
      keys_.push_back(Normal(static_cast<size_t>(lens_[s] * kKvHeads * kDim), 10u + s));
      values_.push_back(Normal(static_cast<size_t>(lens_[s] * kKvHeads * kDim), 20u + s));
    }
  }
  int32_t Slot(int s, int32_t p) const { return tables_[s][p / kBlockSize] * kBlockSize + p % kBlockSize; }
  void Write(const cpu::KernelContext& ctx, int s, int32_t from, int32_t to) {
    std::vector<int32_t> slots;
    for (int32_t p = from; p < to; ++p) slots.push_back(Slot(s, p));
    const int64_t row = kKvHeads * kDim;
    cpu::KvWrite(ctx, cache_.view, to - from, slots.data(), keys_[s].data() + from * row, row,
                 values_[s].data() + from * row, row);
  }
  std::vector<float> Run(const cpu::KernelContext& ctx, const std::vector<int32_t>& seq,
                         const std::vector<int32_t>& pos, const std::vector<float>& q, int32_t window) {
    const int32_t* table_ptrs[2] = {tables_[0].data(), tables_[1].data()};
    const int32_t table_lens[2] = {static_cast<int32_t>(tables_[0].size()), static_cast<int32_t>(tables_[1].size())};
    cpu::AttentionBatch b;
    b.num_tokens = static_cast<int32_t>(seq.size());
    b.token_seq = seq.data();
    b.token_pos = pos.data();
    b.num_seqs = 2;
    b.block_tables = table_ptrs;
    b.block_table_lens = table_lens;
    cpu::AttentionParams params{kHeads, 0.15f, window};
    EXPECT_TRUE(cpu::CheckAttentionBatch(b, cache_.view, params).ok());
    std::vector<float> out(seq.size() * kHeads * kDim, -5.0f);
    cpu::PagedAttention(ctx, b, cache_.view, params, q.data(), kHeads * kDim, out.data(), kHeads * kDim);
    return out;
  }
  // Softmax attention in double over what the cache holds (scale * int8).
  std::vector<double> Reference(const float* q, int s, int32_t pos, float scale, int32_t window) const {
    const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
    const int32_t group = kHeads / kKvHeads;
    std::vector<double> out(kHeads * kDim, 0.0);
    auto at = [&](const std::vector<int8_t>& pool, const std::vector<float>& scales, int32_t p, int h, int c) {
      const int64_t slot = Slot(s, p);
      return static_cast<double>(scales[static_cast<size_t>(slot * kKvHeads + h)]) *
             pool[static_cast<size_t>((slot * kKvHeads + h) * kDim + c)];
    };
    for (int h = 0; h < kHeads; ++h) {
      std::vector<double> w;
      for (int32_t p = first; p <= pos; ++p) {
        double dot = 0;
        for (int c = 0; c < kDim; ++c) dot += q[h * kDim + c] * at(cache_.k, cache_.ks, p, h / group, c);
        w.push_back(dot * scale);
      }
      const double m = *std::max_element(w.begin(), w.end());
      double sum = 0;
      for (double& x : w) sum += (x = std::exp(x - m));
      for (int32_t p = first; p <= pos; ++p) {
        for (int c = 0; c < kDim; ++c) {
          out[static_cast<size_t>(h * kDim + c)] += w[static_cast<size_t>(p - first)] / sum * at(cache_.v, cache_.vs, p, h / group, c);
        }
      }
    }
    return out;
  }

  Int8Cache cache_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> lens_;
  std::vector<std::vector<float>> keys_, values_;
};

TEST_P(Int8Attention, MatchesSoftmaxInDoubleOverTheDequantizedCache) {
  if (!cpu::IsaAvailable(GetParam())) GTEST_SKIP() << "CPU lacks " << IsaName(GetParam());
  cpu::KernelContext ctx;
  ctx.isa = GetParam();
  Write(ctx, 0, 0, lens_[0]);
  Write(ctx, 1, 0, lens_[1]);
  std::vector<int32_t> seq = {0, 0, 1, 0, 1}, pos = {0, 36, 19, 17, 8};
  auto q = Normal(seq.size() * kHeads * kDim, 7);
  for (int32_t window : {0, 5}) {
    auto out = Run(ctx, seq, pos, q, window);
    for (size_t t = 0; t < seq.size(); ++t) {
      auto ref = Reference(q.data() + t * kHeads * kDim, seq[t], pos[t], 0.15f, window);
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_NEAR(out[t * kHeads * kDim + i], ref[i], 2e-5 + 2e-5 * std::fabs(ref[i]))
            << IsaName(GetParam()) << " token " << t << " element " << i << " window " << window;
      }
    }
  }
}

TEST_P(Int8Attention, ChunkedPrefillAndThreadsGiveTheSameBits) {
  if (!cpu::IsaAvailable(GetParam())) GTEST_SKIP() << "CPU lacks " << IsaName(GetParam());
  cpu::KernelContext one;
  one.isa = GetParam();
  cpu::KernelContext two = one;
  two.pool = &DefaultThreadPool(2);
  Write(one, 0, 0, lens_[0]);
  std::vector<int32_t> seq(lens_[0], 0), pos(lens_[0]);
  std::iota(pos.begin(), pos.end(), 0);
  auto q = Normal(seq.size() * kHeads * kDim, 3);
  auto whole = Run(one, seq, pos, q, 0);
  EXPECT_EQ(whole, Run(two, seq, pos, q, 0));
  // Token by token, as decoding would see it.
  for (int32_t p : {0, 9, 36}) {
    std::vector<int32_t> s1 = {0}, p1 = {p};
    std::vector<float> q1(q.begin() + p * kHeads * kDim, q.begin() + (p + 1) * kHeads * kDim);
    auto single = Run(one, s1, p1, q1, 0);
    EXPECT_EQ(0, std::memcmp(single.data(), whole.data() + p * kHeads * kDim, single.size() * sizeof(float))) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, Int8Attention, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

// Whole models: the int8 cache stays close to the f32 one (measured: logits
// of magnitude ~16 move by at most 0.13, tiny-qwen2), and the decomposed
// attention path (gathering int8 K/V back to f32) agrees with the fused
// kernel reading int8 in place.
TEST(KvInt8Model, LogitsStayCloseToTheF32Cache) {
  for (const char* name : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    const std::string dir = testing::ModelDir(name);
    auto w = WeightStore::Open(dir);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    CompileOptions f32;
    f32.precision = Precision::kFp32;
    f32.threads = 2;
    CompileOptions i8 = f32;
    i8.kv_dtype = DType::kI8;
    CompileOptions decomposed = i8;
    decomposed.backend = "testaccel-mm";
    auto mf = CompiledModel::Compile(**w, f32);
    auto mi = CompiledModel::Compile(**w, i8);
    auto md = CompiledModel::Compile(**w, decomposed);
    ASSERT_TRUE(mf.ok() && mi.ok()) << mi.status().ToString();
    ASSERT_TRUE(md.ok()) << md.status().ToString();
    std::vector<int32_t> prompt;
    for (int i = 0; i < 120; ++i) prompt.push_back((i * 37 + 11) % 2000 + 3);
    testing::DirectRunner rf(**mf, 1, 256), ri(**mi, 1, 256), rd(**md, 1, 256);
    auto lf = rf.Prefill({prompt}, 16, true)[0];
    auto li = ri.Prefill({prompt}, 16, true)[0];
    auto ld = rd.Prefill({prompt}, 16, true)[0];
    double max_diff = 0, max_decomposed = 0, max_abs = 0;
    for (size_t i = 0; i < lf.size(); ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(lf[i] - li[i])));
      max_decomposed = std::max(max_decomposed, static_cast<double>(std::fabs(ld[i] - li[i])));
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(lf[i])));
    }
    RecordProperty(std::string(name) + "_int8_kv_max_abs_diff", std::to_string(max_diff));
    EXPECT_GT(max_diff, 0.0) << name << ": the int8 cache should round something";
    EXPECT_LT(max_diff, 0.02 * max_abs) << name;
    // The two paths round differently by a few ulps; where that moves a
    // value across an int8 rounding boundary in a later layer, one
    // quantization step shows: far below the int8 cache's own error.
    EXPECT_LT(max_decomposed, 0.1 * max_diff) << name;
  }
}

}  // namespace kv_int8_tests
}  // namespace kiln
