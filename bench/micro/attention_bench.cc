// Paged attention at Qwen2.5-0.5B's shape (14 query heads over 2 KV heads of
// 64) and at tiny-llama's (8 over 4 of 16), cache in blocks of 16, F32
// (kiln's default) or BF16: one decode token at context 512, a verification
// pass of 5 tokens there, and a 512-token prefill, on 1 and 2 threads; and
// decode and verification with the cache coming from memory, as each
// layer's does in a model's step (its weights pass through the caches in
// between).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <unistd.h>

#include "backend/cpu/kernels/paged_attention.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int32_t kBlockSize = 16, kContext = 512;

struct Shape {
  int32_t heads, kv_heads, head_dim;
};
constexpr Shape kShapes[] = {{14, 2, 64}, {8, 4, 16}};  // Qwen2.5-0.5B, tiny-llama

// Bytes a cold run cycles through: over 96 MB and over twice the last-level
// cache (some server parts have hundreds of MB of it).
double ColdBytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max(96e6, 2.0 * static_cast<double>(l3 > 0 ? l3 : 0));
}

// Args: query tokens (1: decode at position 511; 5: a verification pass at
// 507..511; 512: prefill 0..511),
// threads, cache dtype, shape (kShapes), cold (each call reads a sequence of
// its own, cycling through ColdBytes of cache).
void BM_PagedAttention(benchmark::State& state) {
  const int32_t tokens = static_cast<int32_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const auto kv_type = static_cast<DType>(state.range(2));
  const Shape shape = kShapes[state.range(3)];
  const int32_t kHeads = shape.heads, kKvHeads = shape.kv_heads, kHeadDim = shape.head_dim;
  const bool f32 = kv_type == DType::kF32;
  const bool cold = state.range(4) != 0;
  const int32_t blocks = kContext / kBlockSize;
  const size_t seq_elements = static_cast<size_t>(blocks) * kBlockSize * kKvHeads * kHeadDim;
  const double seq_bytes = static_cast<double>(seq_elements) * 2 * (f32 ? 4 : 2);
  const int32_t copies = cold ? static_cast<int32_t>(ColdBytes() / seq_bytes) + 1 : 1;
  const size_t pool_elements = seq_elements * static_cast<size_t>(copies);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> k_f32(f32 ? pool_elements : seq_elements), v_f32(k_f32.size());
  std::vector<uint16_t> k_bf16(f32 ? 0 : pool_elements), v_bf16(k_bf16.size());
  for (size_t i = 0; i < seq_elements; ++i) {
    k_f32[i] = dist(rng);
    v_f32[i] = dist(rng);
  }
  for (size_t i = 0; i < pool_elements; ++i) {  // every copy holds the first's values
    if (f32) {
      k_f32[i] = k_f32[i % seq_elements];
      v_f32[i] = v_f32[i % seq_elements];
    } else {
      k_bf16[i] = F32ToBf16(k_f32[i % seq_elements]);
      v_bf16[i] = F32ToBf16(v_f32[i % seq_elements]);
    }
  }
  void* k_pool = f32 ? static_cast<void*>(k_f32.data()) : k_bf16.data();
  void* v_pool = f32 ? static_cast<void*>(v_f32.data()) : v_bf16.data();
  // Copy c's sequence holds blocks c * blocks .. (c + 1) * blocks - 1.
  std::vector<int32_t> table(static_cast<size_t>(blocks) * static_cast<size_t>(copies));
  std::iota(table.begin(), table.end(), 0);
  const int32_t* tables[] = {table.data()};
  const int32_t lens[] = {blocks};
  std::vector<int32_t> seq(static_cast<size_t>(tokens), 0), pos(static_cast<size_t>(tokens));
  std::iota(pos.begin(), pos.end(), kContext - tokens);
  std::vector<float> q(static_cast<size_t>(tokens) * kHeads * kHeadDim, 0.1f), out(q.size());

  KvCacheView cache{kv_type, k_pool, v_pool, blocks * copies, kBlockSize, kKvHeads, kHeadDim};
  AttentionBatch batch{tokens, seq.data(), pos.data(), 1, tables, lens};
  AttentionParams params{kHeads, 1.0f / std::sqrt(static_cast<float>(kHeadDim)), 0};
  KernelContext ctx;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  int32_t copy = 0;
  for (auto _ : state) {
    tables[0] = table.data() + static_cast<size_t>(copy) * static_cast<size_t>(blocks);
    copy = (copy + 1) % copies;
    PagedAttention(ctx, batch, cache, params, q.data(), kHeads * kHeadDim, out.data(), kHeads * kHeadDim);
    benchmark::DoNotOptimize(out.data());
  }
  // Keys attended, summed over tokens: each costs a dot and an FMA row per head.
  double keys = 0;
  for (int32_t p : pos) keys += p + 1;
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop/s"] =
      benchmark::Counter(keys * kHeads * kHeadDim * 4, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PagedAttention)
    ->ArgsProduct({{1, 5, 512},
                   {1, 2},
                   {static_cast<int64_t>(DType::kF32), static_cast<int64_t>(DType::kBF16)},
                   {0, 1},
                   {0}})
    ->ArgsProduct(
        {{1, 5}, {1, 2}, {static_cast<int64_t>(DType::kF32), static_cast<int64_t>(DType::kBF16)}, {0}, {1}})
    ->ArgNames({"tokens", "threads", "kv", "shape", "cold"})
    ->UseRealTime();

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
