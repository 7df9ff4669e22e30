// What the tensor-kernel micro benchmarks share: seeded inputs, and timing
// one kernel called as the compiled graph calls it (64-byte aligned
// scratch, the default thread pool when more than one thread is asked).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// Runs `kernel` on `inputs` -> `outputs` for every iteration of `state`.
inline void TimeTensorKernel(benchmark::State& state, const TensorKernel& kernel,
                             const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                             int threads) {
  std::vector<uint8_t> scratch(kernel.scratch_bytes + 64);
  TensorCall call;
  call.inputs = inputs.data();
  call.outputs = outputs.data();
  call.scratch = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  call.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  for (auto _ : state) {
    Status s = kernel.run(call);
    benchmark::DoNotOptimize(s);
    benchmark::ClobberMemory();
  }
}

}  // namespace kiln::cpu
