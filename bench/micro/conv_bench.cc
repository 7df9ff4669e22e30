// fp32 convolution layers at batch 1 on the CPU's tensor kernels: kiln's
// own kernels, oneDNN on plain NCHW (both as kiln runs them, weights packed
// when the kernel is made), and oneDNN on its preferred blocked activation
// layout (the convolution alone, no reorders: what a blocked layout between
// convolutions would give), each with a fused ReLU. Counters: GFLOP/s of wall
// time, GFLOP per CPU-second, and that over one core's fp32 FMA peak
// (kiln's roofline loop).
//
// Layers (arguments: layer, implementation, threads):
//   0 ResNet 3x3 64->64 at 56x56      1 ResNet 1x1 64->256 at 56x56
//   2 ResNet 1x1 256->64 at 56x56     3 ResNet 3x3 512->512 at 7x7
//   4 stem 7x7/2 3->64 at 224x224     5 YOLO 3x3/2 64->128 at 160x160
//   6 MobileNet depthwise 3x3 144 at 56x56   7 depthwise 3x3/2 96 at 112x112
//   8 ResNet 3x3 256->256 at 14x14   9 ResNet 3x3/2 128->256 at 28x28
// Implementations: 0 kiln, 1 oneDNN NCHW, 2 oneDNN blocked (conv only).
// oneDNN runs on OpenMP's threads, not kiln's pool: set OMP_NUM_THREADS to
// the `threads` argument (and OMP_WAIT_POLICY=PASSIVE, or its spinning
// threads slow whatever runs next), e.g.
//   OMP_NUM_THREADS=1 conv_bench --benchmark_filter='threads:1'
// GFLOP per CPU-second is the figure to compare on a shared machine.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <ctime>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "bench/roofline_loops.h"
#include "core/thread_pool.h"
#include "graph/tensor_ops/conv_geometry.h"
#include "tensor_kernel_bench.h"

namespace kiln::cpu {
namespace {

struct Layer {
  const char* name;
  int64_t c, m, group, size, kernel, stride;
};

const Layer kLayers[] = {
    {"resnet_3x3_64_56", 64, 64, 1, 56, 3, 1},       {"resnet_1x1_64to256_56", 64, 256, 1, 56, 1, 1},
    {"resnet_1x1_256to64_56", 256, 64, 1, 56, 1, 1}, {"resnet_3x3_512_7", 512, 512, 1, 7, 3, 1},
    {"stem_7x7s2_3to64_224", 3, 64, 1, 224, 7, 2},   {"yolo_3x3s2_64to128_160", 64, 128, 1, 160, 3, 2},
    {"dw_3x3_144_56", 144, 144, 144, 56, 3, 1},      {"dw_3x3s2_96_112", 96, 96, 96, 112, 3, 2},
    {"resnet_3x3_256_14", 256, 256, 1, 14, 3, 1},    {"resnet_3x3s2_128to256_28", 128, 256, 1, 28, 3, 2},
};

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One core's fp32 FMA FLOP per second of CPU time it gets (kiln's roofline
// loop), so that the fraction below holds on a machine other processes share.
double PeakFlopsPerCoreSecond() {
  static double peak = 0;
  if (peak > 0) return peak;
  const bench::ComputeLoop loop = bench::LoopsForThisCpu().loops[0];
  const int64_t iterations = 20000000;
  for (int rep = 0; rep < 3; ++rep) {
    const double start = ProcessCpuSeconds();
    benchmark::DoNotOptimize(loop.run(iterations));
    peak = std::max(peak,
                    loop.ops_per_iteration * static_cast<double>(iterations) / (ProcessCpuSeconds() - start));
  }
  return peak;
}

// GFLOP/s of wall time, GFLOP per CPU-second of all the process's threads
// (spinning workers count, as they would hold a core), and the latter over
// the per-core peak: the roofline fraction independent of the machine's load.
void SetCounters(benchmark::State& state, double flops, double cpu_seconds) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double per_cpu_second = flops * static_cast<double>(state.iterations()) / cpu_seconds;
  state.counters["GFLOP/cpu-s"] = per_cpu_second * 1e-9;
  state.counters["roofline"] = per_cpu_second / PeakFlopsPerCoreSecond();
}

void BM_Conv(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  const int impl = static_cast<int>(state.range(1)), threads = static_cast<int>(state.range(2));
  const int64_t pad = l.kernel / 2;
  AttributeMap attrs;
  attrs.SetInt("group", l.group);
  attrs.SetInts("strides", {l.stride, l.stride});
  attrs.SetInts("pads", {pad, pad, pad, pad});
  const std::vector<int64_t> x_dims = {1, l.c, l.size, l.size},
                             w_dims = {l.m, l.c / l.group, l.kernel, l.kernel};
  auto geometry = ConvGeometry("Conv", "bench", attrs, x_dims, w_dims);
  if (!geometry.ok()) {
    state.SkipWithError(geometry.status().message().c_str());
    return;
  }
  const std::vector<int64_t> y_dims = geometry->OutputDims();
  const double flops = 2.0 * static_cast<double>(l.m) * static_cast<double>(l.c / l.group) *
                       static_cast<double>(l.kernel * l.kernel) * static_cast<double>(geometry->OutPixels());
  state.SetLabel(l.name);
  std::vector<float> x = RandomFloats(static_cast<size_t>(l.c * l.size * l.size), 1);
  std::vector<float> w = RandomFloats(static_cast<size_t>(l.m * (l.c / l.group) * l.kernel * l.kernel), 2);
  std::vector<float> b = RandomFloats(static_cast<size_t>(l.m), 3);
  std::vector<float> y(static_cast<size_t>(y_dims[1] * y_dims[2] * y_dims[3]));

  if (impl == 2) {
    // oneDNN with the activation layout left to it (blocked), conv alone.
    using dnnl::memory;
    using tag = memory::format_tag;
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const bool grouped = l.group > 1;
    const memory::dims wd = grouped ? memory::dims{l.group, l.m / l.group, l.c / l.group, l.kernel, l.kernel}
                                    : memory::dims{l.m, l.c, l.kernel, l.kernel};
    const memory::desc src_any({1, l.c, l.size, l.size}, memory::data_type::f32, tag::any);
    const memory::desc dst_any(y_dims, memory::data_type::f32, tag::any);
    const memory::desc w_any(wd, memory::data_type::f32, tag::any);
    const memory::desc b_desc({l.m}, memory::data_type::f32, tag::x);
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                         dnnl::algorithm::convolution_direct, src_any, w_any, b_desc, dst_any,
                                         {l.stride, l.stride}, {0, 0}, {pad, pad}, {pad, pad});
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
    memory src(pd.src_desc(), engine), dst(pd.dst_desc(), engine), wm(pd.weights_desc(), engine),
        bm(b_desc, engine);
    std::fill_n(static_cast<float*>(src.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
    std::fill_n(static_cast<float*>(wm.get_data_handle()), pd.weights_desc().get_size() / 4, 0.01f);
    dnnl::convolution_forward conv(pd);
    state.SetLabel(std::string(l.name) + " " + pd.impl_info_str());
    const double cpu_start = ProcessCpuSeconds();
    for (auto _ : state) {
      conv.execute(stream,
                   {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, dst}});
      stream.wait();
    }
    SetCounters(state, flops, ProcessCpuSeconds() - cpu_start);
    return;
  }

  setenv("KILN_CONV", impl == 0 ? "kiln" : "onednn", 1);
  const TensorData wd = TensorData::FromValues<float>(DType::kF32, w_dims, w);
  const TensorData bd = TensorData::FromValues<float>(DType::kF32, {l.m}, b);
  AttributeMap fused = attrs;
  fused.SetString("activation", "Relu");
  TensorKernelArgs args;
  args.op_type = "kiln.FusedConv";
  args.node = "bench";
  args.attrs = &fused;
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
  std::vector<float> scratch(kernel->scratch_bytes / sizeof(float) + 16);
  const void* inputs[3] = {x.data(), wd.data(), bd.data()};
  void* outputs[1] = {y.data()};
  TensorCall call;
  call.inputs = inputs;
  call.outputs = outputs;
  call.scratch = reinterpret_cast<uint8_t*>(scratch.data());
  call.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  const double cpu_start = ProcessCpuSeconds();
  for (auto _ : state) {
    Status s = kernel->run(call);
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, flops, ProcessCpuSeconds() - cpu_start);
}
BENCHMARK(BM_Conv)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 1, 2}, {1, 2}})
    ->ArgNames({"layer", "impl", "threads"})
    ->UseRealTime()
    ->MinTime(0.3);

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
