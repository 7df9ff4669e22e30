// Linear-layer throughput at Qwen2.5-0.5B's shapes: GEMV (decode, M = 1) in
// weight bytes per second, GEMM (prefill, M = 16..512) in FLOP/s, for F32,
// F16 and BF16 weights on 1 and 2 threads; and, for comparison, what this
// machine's memory and FMA units give to the simplest loops: a streaming
// read (BM_StreamRead) and independent FMA chains (BM_PeakFma).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <immintrin.h>

#include "backend/cpu/kernels/linear.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "core/cpu_info.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

// `copies` packed random weight matrices of one shape, kept while
// consecutive runs ask for that shape (memory stays bounded by one shape's
// set, up to ~100 MB for the cold runs or the 272 MB lm_head).
const std::vector<std::unique_ptr<PackedWeight>>& Weights(DType dtype, int64_t n, int64_t k, int copies) {
  static std::tuple<DType, int64_t, int64_t, int> key{};
  static std::vector<std::unique_ptr<PackedWeight>> weights;
  if (key != std::make_tuple(dtype, n, k, copies)) {
    weights.clear();
    key = {dtype, n, k, copies};
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
    const size_t count = static_cast<size_t>(n * k);
    std::vector<float> f32(dtype == DType::kF32 ? count : 0);
    std::vector<uint16_t> f16(dtype == DType::kF32 ? 0 : count);
    for (int c = 0; c < copies; ++c) {
      for (float& v : f32) v = dist(rng);
      for (uint16_t& v : f16) v = dtype == DType::kBF16 ? F32ToBf16(dist(rng)) : F32ToF16(dist(rng));
      const void* data = dtype == DType::kF32 ? static_cast<const void*>(f32.data()) : f16.data();
      weights.push_back(std::make_unique<PackedWeight>(PackLinearWeight(dtype, data, n, k).value()));
    }
  }
  return weights;
}

// Args: M, N, K, dtype, threads, cold. Cold runs cycle through enough
// copies of the weights (over 96 MB) that they come from memory, not from
// the last-level cache, as a whole model's weights do when decoding.
void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const DType dtype = static_cast<DType>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  const bool cold = state.range(5) != 0;
  const double element = dtype == DType::kF32 ? 4.0 : 2.0;
  const double bytes = static_cast<double>(n * k) * element;
  const int copies = cold ? static_cast<int>(96e6 / bytes) + 1 : 1;
  const auto& weights = Weights(dtype, n, k, copies);
  std::vector<float> x(static_cast<size_t>(m * k), 0.01f), y(static_cast<size_t>(m * n));
  KernelContext ctx;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  size_t next = 0;
  for (auto _ : state) {
    Linear(ctx, m, x.data(), k, *weights[next], nullptr, y.data(), n);
    next = (next + 1) % weights.size();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(DTypeName(dtype)) + " " + IsaName(ctx.isa) + " " + std::to_string(threads) +
                 "t" + (cold ? " cold" : ""));
}

void LinearArgs(benchmark::internal::Benchmark* b) {
  const int64_t kShapes[][2] = {{896, 896}, {128, 896}, {4864, 896}, {896, 4864}};  // {N, K}
  const DType kDtypes[] = {DType::kBF16, DType::kF16, DType::kF32};
  for (int threads : {1, 2}) {
    for (DType dtype : kDtypes) {
      for (auto& s : kShapes) {
        for (int64_t m : {1, 16, 128, 512}) b->Args({m, s[0], s[1], static_cast<int64_t>(dtype), threads, 0});
        // Weights from memory: decoding (1 row) and verifying 4 draft
        // tokens (5 rows), which should cost about as much.
        for (int64_t m : {1, 5}) b->Args({m, s[0], s[1], static_cast<int64_t>(dtype), threads, 1});
      }
    }
    // The lm_head: 151936 x 896 (272 MB in BF16), decode only.
    b->Args({1, 151936, 896, static_cast<int64_t>(DType::kBF16), threads, 0});
  }
}
BENCHMARK(BM_Linear)->Apply(LinearArgs)->ArgNames({"M", "N", "K", "dtype", "threads", "cold"})->UseRealTime();

// Reads a 256 MB buffer, far bigger than the caches, with 32-byte loads into
// independent accumulators, split over threads like the kernels: what a
// memory-bound kernel can hope for. Arg: threads.
__attribute__((target("avx2"))) uint64_t XorAll(const uint64_t* p, int64_t begin, int64_t end) {
  __m256i acc[4] = {};
  for (int64_t i = begin; i < end; i += 16) {
    for (int j = 0; j < 4; ++j) {
      acc[j] = _mm256_xor_si256(acc[j], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4 * j)));
    }
  }
  __m256i all = _mm256_xor_si256(_mm256_xor_si256(acc[0], acc[1]), _mm256_xor_si256(acc[2], acc[3]));
  return static_cast<uint64_t>(_mm256_extract_epi64(all, 0) ^ _mm256_extract_epi64(all, 3));
}

void BM_StreamRead(benchmark::State& state) {
  if (!IsaAvailable(Isa::kAvx2)) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  const int64_t words = int64_t{256} << 20 >> 3;
  static uint64_t* buffer = [&] {
    auto* p = static_cast<uint64_t*>(std::aligned_alloc(64, static_cast<size_t>(words) * 8));
    for (int64_t i = 0; i < words; ++i) p[i] = static_cast<uint64_t>(i);
    return p;
  }();
  ThreadPool& pool = DefaultThreadPool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool.ParallelFor(words / 16, [&](int64_t begin, int64_t end, int thread) {
      sums[static_cast<size_t>(thread)] = XorAll(buffer, begin * 16, end * 16);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["bytes/s"] =
      benchmark::Counter(static_cast<double>(words * 8), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime();

// 12 independent FMA chains of 8 floats per thread: the FMA units' peak as
// this machine delivers it right now. Arg: threads.
__attribute__((target("avx2,fma"))) void FmaChains(int64_t iterations, float* out) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  *out = _mm256_cvtss_f32(acc[0]);
}

void BM_PeakFma(benchmark::State& state) {
  if (!IsaAvailable(Isa::kAvx2)) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  constexpr int64_t kIterations = 1 << 22;
  ThreadPool& pool = DefaultThreadPool(threads);
  std::vector<float> out(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool.ParallelFor(threads, [&](int64_t, int64_t, int thread) {
      FmaChains(kIterations, &out[static_cast<size_t>(thread)]);
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["flop/s"] = benchmark::Counter(static_cast<double>(threads) * kIterations * 12 * 16,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakFma)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime();

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
