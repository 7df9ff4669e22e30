// MaxPool 3x3 stride 2 after the network stems (SqueezeNet, ShuffleNetV2,
// ResNet-18), row-major and nchw16c (as the layout stage runs them), at batch
// 1. The figures are the real time per call and the bytes read and written
// per second (a pool should run near memory speed).
// Arguments: layer, layout (0 row-major, 1 nchw16c), threads, e.g.
//   max_pool_bench --benchmark_filter='threads:2'
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "tensor_kernel_bench.h"

namespace kiln::cpu {
namespace {

struct Pool {
  const char* name;
  int64_t c, size, pad;
};

const Pool kPools[] = {
    {"squeezenet_64x111", 64, 111, 0},
    {"shufflenet_24x112", 24, 112, 1},
    {"resnet_64x112", 64, 112, 1},
};
constexpr int64_t kNumPools = sizeof(kPools) / sizeof(kPools[0]);

void BM_MaxPool(benchmark::State& state) {
  const Pool& l = kPools[state.range(0)];
  const bool blocked = state.range(1) == 1;
  const int threads = static_cast<int>(state.range(2));
  AttributeMap attrs;
  attrs.SetInts("kernel_shape", {3, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {l.pad, l.pad, l.pad, l.pad});
  if (blocked) attrs.SetString("activation_layout", "nchw16c");
  const int64_t out = (l.size + 2 * l.pad - 3) / 2 + 1;
  const int64_t channels = blocked ? (l.c + 15) / 16 * 16 : l.c;
  std::vector<float> x = RandomFloats(static_cast<size_t>(channels * l.size * l.size), 1);
  std::vector<float> y(static_cast<size_t>(channels * out * out));
  TensorKernelArgs args;
  args.op_type = "MaxPool";
  args.node = "bench";
  args.attrs = &attrs;
  args.inputs = {TensorType{DType::kF32, {1, l.c, l.size, l.size}}};
  args.present = {true};
  args.constants = {nullptr};
  args.outputs = {TensorType{DType::kF32, {1, l.c, out, out}}};
  args.num_threads = threads;
  auto kernel = MakeTensorKernel(args);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  state.SetLabel(std::string(l.name) + " " + kernel->impl);
  TimeTensorKernel(state, *kernel, {x.data()}, {y.data()}, threads);
  const double bytes = sizeof(float) * static_cast<double>(x.size() + y.size());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t l = 0; l < kNumPools; ++l)
    for (int64_t layout : {0, 1})
      for (int64_t threads : {1, 2}) b->Args({l, layout, threads});
}

BENCHMARK(BM_MaxPool)
    ->Apply(Args)
    ->ArgNames({"layer", "layout", "threads"})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
