// The layout stage's kiln.Reorder between row-major and nchw16c
// (layout_reorder.h) on activations of the vision models, at batch 1. The
// figures are the real time per call and the bytes read and written per
// second (a reorder should run near memory speed).
// Arguments: shape, direction (0 row-major -> nchw16c, 1 back), threads.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/layout_reorder.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

struct Shape {
  const char* name;
  int64_t c, h, w;
};

const Shape kShapes[] = {
    {"squeezenet_stem_64x111", 64, 111, 111},
    {"shufflenet_116x28", 116, 28, 28},
    {"mobilenet_96x14", 96, 14, 14},
    {"yolo_16x160", 16, 160, 160},
};
constexpr int64_t kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);

void BM_Reorder(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  const bool to_blocked = state.range(1) == 0;
  const int threads = static_cast<int>(state.range(2));
  const TensorType type{DType::kF32, {1, s.c, s.h, s.w}};
  const TensorLayout from = to_blocked ? TensorLayout::kRowMajor : TensorLayout::kNCHW16c;
  const TensorLayout to = to_blocked ? TensorLayout::kNCHW16c : TensorLayout::kRowMajor;
  std::vector<float> src(TensorBytesIn(type, from) / sizeof(float), 1.0f);
  std::vector<float> dst(TensorBytesIn(type, to) / sizeof(float));
  ThreadPool* pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  state.SetLabel(s.name);
  for (auto _ : state) {
    const bool done = FastReorder(type, from, to, src.data(), dst.data(), pool);
    benchmark::DoNotOptimize(done);
    benchmark::DoNotOptimize(dst.data());
  }
  const double bytes = sizeof(float) * static_cast<double>(src.size() + dst.size());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t s = 0; s < kNumShapes; ++s)
    for (int64_t direction : {0, 1})
      for (int64_t threads : {1, 2}) b->Args({s, direction, threads});
}

BENCHMARK(BM_Reorder)
    ->Apply(Args)
    ->ArgNames({"shape", "direction", "threads"})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
