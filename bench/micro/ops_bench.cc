// The small ops of a Qwen2.5-0.5B layer: RMSNorm over 896, RoPE on 14 heads
// of 64, SiLU-mul over 4864, for 1 (decode) and 512 (prefill) rows on 1 and
// 2 threads, in bytes touched per second.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "backend/cpu/kernels/activation.h"
#include "backend/cpu/kernels/rms_norm.h"
#include "backend/cpu/kernels/rope.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

KernelContext Context(int threads) {
  KernelContext ctx;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  return ctx;
}

void SetBytes(benchmark::State& state, double bytes_per_iteration) {
  state.counters["bytes/s"] =
      benchmark::Counter(bytes_per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: rows, threads.
void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = 896;
  std::vector<float> x(static_cast<size_t>(rows * dim), 0.5f), w(static_cast<size_t>(dim), 1.0f), y(x.size());
  const KernelContext ctx = Context(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    RmsNorm(ctx, rows, dim, x.data(), dim, w.data(), 1e-6f, y.data(), dim);
    benchmark::DoNotOptimize(y.data());
  }
  SetBytes(state, 2.0 * static_cast<double>(x.size()) * sizeof(float));
}
BENCHMARK(BM_RmsNorm)->ArgsProduct({{1, 512}, {1, 2}})->ArgNames({"rows", "threads"})->UseRealTime();

void BM_Rope(benchmark::State& state) {
  const int64_t rows = state.range(0), heads = 14, head_dim = 64;
  auto table = RopeTable::Build(head_dim, head_dim, 1000000.0, RopeScaling{}, 4096);
  std::vector<float> x(static_cast<size_t>(rows * heads * head_dim), 0.5f);
  std::vector<int32_t> positions(static_cast<size_t>(rows));
  std::iota(positions.begin(), positions.end(), 100);
  const KernelContext ctx = Context(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    ApplyRope(ctx, *table, RopeStyle::kHalf, rows, positions.data(), heads, x.data(), heads * head_dim);
    benchmark::DoNotOptimize(x.data());
  }
  SetBytes(state, 2.0 * static_cast<double>(x.size()) * sizeof(float));
}
BENCHMARK(BM_Rope)->ArgsProduct({{1, 512}, {1, 2}})->ArgNames({"rows", "threads"})->UseRealTime();

void BM_SiluMul(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 4864;
  std::vector<float> gate_up(static_cast<size_t>(rows * 2 * cols), 0.5f),
      out(static_cast<size_t>(rows * cols));
  const KernelContext ctx = Context(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    SiluMul(ctx, rows, cols, gate_up.data(), 2 * cols, gate_up.data() + cols, 2 * cols, out.data(), cols);
    benchmark::DoNotOptimize(out.data());
  }
  SetBytes(state, 3.0 * static_cast<double>(out.size()) * sizeof(float));
}
BENCHMARK(BM_SiluMul)->ArgsProduct({{1, 512}, {1, 2}})->ArgNames({"rows", "threads"})->UseRealTime();

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
