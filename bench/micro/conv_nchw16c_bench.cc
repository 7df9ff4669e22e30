// Convolutions on nchw16c activations at batch 1, as the layout stage runs
// them (Conv with activation_layout = nchw16c and a fused ReLU): kiln's own
// kernels (conv_nchw16c.h) against oneDNN's blocked ones (direct and Winograd), on the 1x1 and
// depthwise layers of MobileNetV3-Small (and its Squeeze-Excitation
// products on a 1x1 image), ShuffleNetV2, ResNet-18 (its 3x3 layers too) and
// YOLOv8n (its 3x3 layers too). The figure is the real time per call (and GFLOP/s).
// Arguments: layer, implementation (0 kiln, 1 oneDNN, 2 oneDNN's Winograd
// kernel, 3x3 stride-1 layers only), threads; set
// OMP_NUM_THREADS to `threads` and OMP_WAIT_POLICY=PASSIVE, e.g.
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE conv_nchw16c_bench --benchmark_filter='threads:2'
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_ops/conv_geometry.h"
#include "tensor_kernel_bench.h"

namespace kiln::cpu {
namespace {

struct Layer {
  const char* name;
  int64_t c, m, group, size, kernel, stride;
};

const Layer kLayers[] = {
    {"mnv3_1x1_16to72_56", 16, 72, 1, 56, 1, 1},
    {"mnv3_1x1_72to24_28", 72, 24, 1, 28, 1, 1},
    {"mnv3_1x1_24to88_28", 24, 88, 1, 28, 1, 1},
    {"mnv3_1x1_96to40_14", 96, 40, 1, 14, 1, 1},
    {"mnv3_1x1_40to240_14", 40, 240, 1, 14, 1, 1},
    {"mnv3_1x1_240to40_14", 240, 40, 1, 14, 1, 1},
    {"mnv3_1x1_288to96_7", 288, 96, 1, 7, 1, 1},
    {"mnv3_1x1_96to576_7", 96, 576, 1, 7, 1, 1},
    {"shuffle_1x1_24_28", 24, 24, 1, 28, 1, 1},
    {"shuffle_1x1_48_14", 48, 48, 1, 14, 1, 1},
    {"shuffle_1x1_192to1024_7", 192, 1024, 1, 7, 1, 1},
    {"resnet_1x1s2_64to128_56", 64, 128, 1, 56, 1, 2},
    {"resnet_1x1s2_256to512_14", 256, 512, 1, 14, 1, 2},
    {"yolo_1x1_32_80", 32, 32, 1, 80, 1, 1},
    {"yolo_1x1_64_40", 64, 64, 1, 40, 1, 1},
    {"yolo_1x1_128to256_20", 128, 256, 1, 20, 1, 1},
    {"yolo_1x1_256_10", 256, 256, 1, 10, 1, 1},
    {"mnv3_dw_3x3s2_16_112", 16, 16, 16, 112, 3, 2},
    {"mnv3_dw_3x3s2_72_56", 72, 72, 72, 56, 3, 2},
    {"mnv3_dw_3x3_88_28", 88, 88, 88, 28, 3, 1},
    {"mnv3_dw_5x5s2_96_28", 96, 96, 96, 28, 5, 2},
    {"mnv3_dw_5x5_240_14", 240, 240, 240, 14, 5, 1},
    {"mnv3_dw_5x5_576_7", 576, 576, 576, 7, 5, 1},
    {"shuffle_dw_3x3s2_24_56", 24, 24, 24, 56, 3, 2},
    {"shuffle_dw_3x3_48_14", 48, 48, 48, 14, 3, 1},
    {"mnv3_se_576to144_1", 576, 144, 1, 1, 1, 1},
    {"mnv3_se_144to576_1", 144, 576, 1, 1, 1, 1},
    {"resnet_3x3_64_56", 64, 64, 1, 56, 3, 1},
    {"resnet_3x3s2_64to128_56", 64, 128, 1, 56, 3, 2},
    {"resnet_3x3_128_28", 128, 128, 1, 28, 3, 1},
    {"resnet_3x3s2_128to256_28", 128, 256, 1, 28, 3, 2},
    {"resnet_3x3_256_14", 256, 256, 1, 14, 3, 1},
    {"resnet_3x3s2_256to512_14", 256, 512, 1, 14, 3, 2},
    {"resnet_3x3_512_7", 512, 512, 1, 7, 3, 1},
    {"squeeze_1x1_16to64_55", 16, 64, 1, 55, 1, 1},
    {"squeeze_3x3_16to64_55", 16, 64, 1, 55, 3, 1},
    {"squeeze_3x3_32to128_27", 32, 128, 1, 27, 3, 1},
    {"squeeze_3x3_48to192_13", 48, 192, 1, 13, 3, 1},
    {"squeeze_3x3_64to256_13", 64, 256, 1, 13, 3, 1},
    {"squeeze_1x1_512to1000_13", 512, 1000, 1, 13, 1, 1},
    {"yolo_3x3_16_80", 16, 16, 1, 80, 3, 1},
    {"yolo_3x3_32_40", 32, 32, 1, 40, 3, 1},
    {"yolo_3x3_64_20", 64, 64, 1, 20, 3, 1},
    {"yolo_3x3_128_10", 128, 128, 1, 10, 3, 1},
    {"yolo_head_3x3_64_40", 64, 64, 1, 40, 3, 1},
    {"yolo_head_3x3_80_40", 80, 80, 1, 40, 3, 1},
    {"yolo_head_3x3_128to64_20", 128, 64, 1, 20, 3, 1},
    {"yolo_head_3x3_64_80", 64, 64, 1, 80, 3, 1},
};
constexpr int64_t kNumLayers = sizeof(kLayers) / sizeof(kLayers[0]);

int64_t BlockedCount(const std::vector<int64_t>& d) {
  return d[0] * ((d[1] + 15) / 16) * 16 * d[2] * d[3];
}

void BM_ConvNchw16c(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  const int impl = static_cast<int>(state.range(1)), threads = static_cast<int>(state.range(2));
  const int64_t pad = l.kernel / 2;
  AttributeMap attrs;
  attrs.SetInt("group", l.group);
  attrs.SetInts("strides", {l.stride, l.stride});
  attrs.SetInts("pads", {pad, pad, pad, pad});
  attrs.SetString("activation", "Relu");
  attrs.SetString("activation_layout", "nchw16c");
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
  std::vector<float> x = RandomFloats(static_cast<size_t>(BlockedCount(x_dims)), 1);
  const TensorData wd = TensorData::FromValues<float>(
      DType::kF32, w_dims, RandomFloats(static_cast<size_t>(l.m * (l.c / l.group) * l.kernel * l.kernel), 2));
  const TensorData bd =
      TensorData::FromValues<float>(DType::kF32, {l.m}, RandomFloats(static_cast<size_t>(l.m), 3));
  std::vector<float> y(static_cast<size_t>(BlockedCount(y_dims)));

  setenv("KILN_CONV", impl == 0 ? "kiln" : impl == 1 ? "onednn" : "onednn-winograd", 1);
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
  for (int64_t l = 0; l < kNumLayers; ++l)
    for (int64_t impl : {0, 1, 2}) {
      if (impl == 2 && (kLayers[l].kernel != 3 || kLayers[l].stride != 1 || kLayers[l].group != 1)) continue;
      for (int64_t threads : {1, 2}) b->Args({l, impl, threads});
    }
}

BENCHMARK(BM_ConvNchw16c)
    ->Apply(Args)
    ->ArgNames({"layer", "impl", "threads"})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
