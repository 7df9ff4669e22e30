// Network stems at batch 1: the first convolution, of 3 input channels, read
// from the row-major (NCHW) image. Implementations writing nchw16c, as the
// layout stage runs them: 0 kiln's stem kernel (conv_nchw16c.h,
// KILN_CONV=kiln), 1 oneDNN's nchw -> nChw16c kernel (KILN_CONV=onednn; the
// default but where PreferKilnStem picks kiln's); and 2
// what a row-major stem runs (row-major output: kiln's GEMM, or oneDNN with
// its reorders from 20 MFLOP), for comparison.
// The figure is the real time per call (and GFLOP/s).
// Arguments: layer, implementation, threads; set OMP_NUM_THREADS to
// `threads` and OMP_WAIT_POLICY=PASSIVE, e.g.
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE conv_stem_bench --benchmark_filter='threads:2'
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_ops/conv_geometry.h"
#include "tensor_kernel_bench.h"

namespace kiln::cpu {
namespace {

struct Stem {
  const char* name;
  int64_t m, size, kernel, stride, pad;
  const char* activation;
};

const Stem kStems[] = {
    {"squeezenet_3to64_3x3s2_224", 64, 224, 3, 2, 0, "Relu"},
    {"mnv3_3to16_3x3s2_224", 16, 224, 3, 2, 1, "HardSwish"},
    {"shufflenet_3to24_3x3s2_224", 24, 224, 3, 2, 1, "Relu"},
    {"resnet_3to64_7x7s2_224", 64, 224, 7, 2, 3, "Relu"},
    {"yolov8n_3to16_3x3s2_320", 16, 320, 3, 2, 1, "Silu"},
};
constexpr int64_t kNumStems = sizeof(kStems) / sizeof(kStems[0]);

void BM_ConvStem(benchmark::State& state) {
  const Stem& l = kStems[state.range(0)];
  const int impl = static_cast<int>(state.range(1)), threads = static_cast<int>(state.range(2));
  constexpr int64_t c = 3;
  AttributeMap attrs;
  attrs.SetInts("strides", {l.stride, l.stride});
  attrs.SetInts("pads", {l.pad, l.pad, l.pad, l.pad});
  attrs.SetString("activation", l.activation);
  if (impl != 2) {
    attrs.SetString("activation_layout", "nchw16c");
    attrs.SetString("input_layout", "row-major");
  }
  const std::vector<int64_t> x_dims = {1, c, l.size, l.size}, w_dims = {l.m, c, l.kernel, l.kernel};
  auto geometry = ConvGeometry("Conv", "bench", attrs, x_dims, w_dims);
  if (!geometry.ok()) {
    state.SkipWithError(geometry.status().message().c_str());
    return;
  }
  const std::vector<int64_t> y_dims = geometry->OutputDims();
  const double flops =
      2.0 * static_cast<double>(l.m * c * l.kernel * l.kernel) * static_cast<double>(geometry->OutPixels());
  std::vector<float> x = RandomFloats(static_cast<size_t>(c * l.size * l.size), 1);
  const TensorData wd = TensorData::FromValues<float>(
      DType::kF32, w_dims, RandomFloats(static_cast<size_t>(l.m * c * l.kernel * l.kernel), 2));
  const TensorData bd =
      TensorData::FromValues<float>(DType::kF32, {l.m}, RandomFloats(static_cast<size_t>(l.m), 3));
  std::vector<float> y(static_cast<size_t>((l.m + 15) / 16 * 16 * y_dims[2] * y_dims[3]));

  if (impl != 2) setenv("KILN_CONV", impl == 0 ? "kiln" : "onednn", 1);
  TensorKernelArgs args;
  args.op_type = "kiln.FusedConv";
  args.node = "bench";
  args.attrs = &attrs;
  args.inputs = {TensorType{DType::kF32, x_dims}, wd.type(), bd.type()};
  args.present = {true, true, true};
  args.constants = {nullptr, &wd, &bd};
  args.outputs = {TensorType{DType::kF32, y_dims}};
  args.num_threads = threads;
  auto kernel = MakeTensorKernel(args);
  unsetenv("KILN_CONV");
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  state.SetLabel(std::string(l.name) + " " + kernel->impl);
  TimeTensorKernel(state, *kernel, {x.data(), wd.data(), bd.data()}, {y.data()}, threads);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MFLOP"] = flops * 1e-6;
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t l = 0; l < kNumStems; ++l)
    for (int64_t impl : {0, 1, 2})
      for (int64_t threads : {1, 2}) b->Args({l, impl, threads});
}

BENCHMARK(BM_ConvStem)
    ->Apply(Args)
    ->ArgNames({"layer", "impl", "threads"})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
