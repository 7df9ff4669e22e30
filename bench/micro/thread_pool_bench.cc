// The fixed cost of a parallel step: ParallelFor on tiny work (back to back,
// and after a stretch of serial work on the caller, as when a serial node
// runs between two parallel ones), and a Program of steps that do nothing
// but call the pool, against one of empty steps.
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "compiler/program.h"
#include "core/thread_pool.h"

namespace kiln {
namespace {

// Busy for `us` microseconds of wall time (the work of one range).
void BusyFor(double us) {
  if (us <= 0) return;
  auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(us * 1000));
  while (std::chrono::steady_clock::now() < end) {
  }
}

// ParallelFor of `range(0)` microseconds of work in all, split over 2
// threads, called back to back.
void BM_ParallelForTinyWork(benchmark::State& state) {
  ThreadPool& pool = DefaultThreadPool(2);
  const double total_us = static_cast<double>(state.range(0));
  for (auto _ : state) {
    pool.ParallelFor(2, [&](int64_t begin, int64_t end, int) {
      BusyFor(total_us * static_cast<double>(end - begin) / 2);
    });
  }
  state.counters["ideal_us"] = total_us / 2;
}
BENCHMARK(BM_ParallelForTinyWork)->Arg(0)->Arg(1)->Arg(5)->Arg(10)->Arg(50)->UseRealTime();

// Serial work of `range(0)` microseconds on the caller, then a ParallelFor
// of 10 us in all: the worker has been idle for the gap. range(1) = 1: the
// calls are made under a BusyScope, as a compiled graph's run makes them.
void BM_ParallelForAfterSerialGap(benchmark::State& state) {
  ThreadPool& pool = DefaultThreadPool(2);
  const double gap_us = static_cast<double>(state.range(0));
  ThreadPool::BusyScope busy(state.range(1) != 0 ? &pool : nullptr);
  for (auto _ : state) {
    BusyFor(gap_us);
    pool.ParallelFor(
        2, [&](int64_t begin, int64_t end, int) { BusyFor(5.0 * static_cast<double>(end - begin)); });
  }
  state.counters["ideal_us"] = gap_us + 5;
}
BENCHMARK(BM_ParallelForAfterSerialGap)->ArgsProduct({{10, 30, 100, 300}, {0, 1}})->UseRealTime();

// A Program of `range(1)` host steps; range(0) = 0: empty steps (the
// executor's own cost), 1: each step a ParallelFor with an empty body,
// 2: each a ParallelFor of 2 us of work per thread; range(2) = 1: run
// under a BusyScope. Reported per step.
void BM_ProgramPerStep(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const int num_steps = static_cast<int>(state.range(1));
  std::vector<Step> steps(static_cast<size_t>(num_steps));
  for (Step& s : steps) {
    s.name = "step";
    if (kind == 0) {
      s.run = [](const RunState&) {};
    } else {
      const double us = kind == 2 ? 2.0 : 0.0;
      s.run = [us](const RunState& rs) {
        rs.pool->ParallelFor(2, [us](int64_t, int64_t, int) { BusyFor(us); });
      };
    }
  }
  Program program(
      ShapeEnv{}, std::move(steps),
      std::vector<std::vector<std::pair<std::string, BoundValue>>>(static_cast<size_t>(num_steps)), {}, {});
  RunState rs;
  rs.pool = &DefaultThreadPool(2);
  ThreadPool::BusyScope busy(state.range(2) != 0 ? rs.pool : nullptr);
  for (auto _ : state) {
    Status s = program.Run(rs, nullptr);
    benchmark::DoNotOptimize(s);
  }
  state.counters["per_step_ns"] =
      benchmark::Counter(static_cast<double>(num_steps) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ProgramPerStep)->ArgsProduct({{0, 1, 2}, {100}, {0, 1}})->UseRealTime();

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
