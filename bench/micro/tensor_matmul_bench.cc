// The MatMul tensor op at ViT-small's shapes (197 tokens, width 384, MLP
// 1536, 6 heads of 64) in FLOP/s: projections with a constant B (packed at
// bind time), the same with B an activation (packed per call), attention's
// batched Q K^T and P V, and the int8 QLinearMatMul on constant weights.
// The label names the CPU, the ISA the kernels dispatch to and the threads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "graph/tensor_data.h"

namespace kiln::cpu {
namespace {

TensorData Random(DType dtype, std::vector<int64_t> dims, int seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  if (dtype == DType::kF32) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    return TensorData::FromValues<float>(dtype, std::move(dims), v);
  }
  std::uniform_int_distribution<int> dist(dtype == DType::kI8 ? -127 : 0, 127);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& x : v) x = static_cast<uint8_t>(dist(rng));
  return TensorData::FromValues<uint8_t>(dtype, std::move(dims), v);
}

std::string Label(const std::string& impl, int threads) {
  return GetCpuInfo().model_name + " | isa " + IsaName(BestIsa()) + " | " + impl + " | " +
         std::to_string(threads) + "t";
}

// Runs `kernel` over the inputs while the state asks.
void RunKernel(benchmark::State& state, const TensorKernel& kernel, const std::vector<TensorData>& inputs,
               const TensorType& out, int threads, double flops) {
  std::vector<const void*> in;
  for (const TensorData& t : inputs) in.push_back(t.data());
  std::vector<uint8_t> y(out.Bytes() + 64);
  void* y_ptr = y.data();
  std::unique_ptr<uint8_t, decltype(&std::free)> scratch(
      static_cast<uint8_t*>(std::aligned_alloc(64, (kernel.scratch_bytes + 63) / 64 * 64 + 64)), &std::free);
  TensorCall call;
  call.inputs = in.data();
  call.outputs = &y_ptr;
  call.scratch = scratch.get();
  call.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  for (auto _ : state) {
    Status s = kernel.run(call);
    benchmark::DoNotOptimize(y.data());
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  state.counters["flop/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(Label(kernel.impl, threads));
}

// Args: batch, M, K, N, constant B, threads.
void BM_MatMulF32(benchmark::State& state) {
  const int64_t batch = state.range(0), m = state.range(1), k = state.range(2), n = state.range(3);
  const bool constant = state.range(4) != 0;
  const int threads = static_cast<int>(state.range(5));
  std::vector<int64_t> a_dims = {m, k}, b_dims = {k, n}, y_dims = {m, n};
  if (batch > 1) {
    a_dims.insert(a_dims.begin(), batch);
    b_dims.insert(b_dims.begin(), batch);
    y_dims.insert(y_dims.begin(), batch);
  }
  const std::vector<TensorData> inputs = {Random(DType::kF32, a_dims, 1), Random(DType::kF32, b_dims, 2)};
  AttributeMap attrs;
  TensorKernelArgs args;
  args.op_type = "MatMul";
  args.node = "bench";
  args.attrs = &attrs;
  args.inputs = {inputs[0].type(), inputs[1].type()};
  args.present = {true, true};
  args.constants = {nullptr, constant ? &inputs[1] : nullptr};
  args.outputs = {TensorType{DType::kF32, y_dims}};
  args.num_threads = threads;
  auto kernel = MakeTensorKernel(args);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  RunKernel(state, *kernel, inputs, args.outputs[0], threads, 2.0 * static_cast<double>(batch * m * n * k));
}

void MatMulArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    // Projections: QKV, attention out, MLP up, MLP down; B a weight, then an activation.
    for (int constant : {1, 0}) {
      b->Args({1, 197, 384, 1152, constant, threads});
      b->Args({1, 197, 384, 384, constant, threads});
      b->Args({1, 197, 384, 1536, constant, threads});
      b->Args({1, 197, 1536, 384, constant, threads});
    }
    // Attention per head: Q K^T (K^T laid out [64, 197]) and P V.
    b->Args({6, 197, 64, 197, 0, threads});
    b->Args({6, 197, 197, 64, 0, threads});
  }
}
BENCHMARK(BM_MatMulF32)
    ->Apply(MatMulArgs)
    ->ArgNames({"batch", "M", "K", "N", "const", "threads"})
    ->UseRealTime();

// QLinearMatMul u8 x s8 with constant weights. Args: M, K, N, threads.
void BM_QLinearMatMul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  auto scalar_f = [](float v) { return TensorData::FromValues<float>(DType::kF32, {}, {v}); };
  const std::vector<TensorData> inputs = {Random(DType::kU8, {m, k}, 1),
                                          scalar_f(0.02f),
                                          TensorData::FromValues<uint8_t>(DType::kU8, {}, {128}),
                                          Random(DType::kI8, {k, n}, 2),
                                          scalar_f(0.01f),
                                          TensorData::FromValues<int8_t>(DType::kI8, {}, {0}),
                                          scalar_f(0.5f),
                                          TensorData::FromValues<uint8_t>(DType::kU8, {}, {128})};
  AttributeMap attrs;
  TensorKernelArgs args;
  args.op_type = "QLinearMatMul";
  args.node = "bench";
  args.attrs = &attrs;
  for (const TensorData& t : inputs) {
    args.inputs.push_back(t.type());
    args.present.push_back(true);
    args.constants.push_back(&t == &inputs[0] ? nullptr : &t);
  }
  args.outputs = {TensorType{DType::kU8, {m, n}}};
  args.num_threads = threads;
  auto kernel = MakeTensorKernel(args);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  RunKernel(state, *kernel, inputs, args.outputs[0], threads, 2.0 * static_cast<double>(m * n * k));
}
BENCHMARK(BM_QLinearMatMul)
    ->Args({197, 384, 1152, 1})
    ->Args({197, 1536, 384, 1})
    ->Args({197, 384, 1152, 2})
    ->Args({197, 1536, 384, 2})
    ->ArgNames({"M", "K", "N", "threads"})
    ->UseRealTime();

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
