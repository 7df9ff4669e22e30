// What the elementwise and reduce kernels share: attribute defaults, dtype
// dispatch, splitting work over the pool, and running float16 tensors
// through the float32 kernels.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

int64_t IntAttrOr(const TensorKernelArgs& args, const char* name, int64_t fallback);
float FloatAttrOr(const TensorKernelArgs& args, const char* name, float fallback);
std::string StringAttrOr(const TensorKernelArgs& args, const char* name, const std::string& fallback);

// Elements per thread below which splitting costs more than it saves.
inline constexpr int64_t kParallelGrain = 16384;

// body(begin, end) over pieces of [0, n), each at least `grain` long, on
// the pool when there is one and enough work.
template <typename Body>
void SplitRanges(ThreadPool* pool, int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  if (pool == nullptr || pool->num_threads() <= 1 || n < 2 * grain) {
    body(int64_t{0}, n);
    return;
  }
  pool->ParallelFor(n, grain, [&](int64_t begin, int64_t end, int) { body(begin, end); });
}

// Calls f(T{}) with T the C++ type of a plain numeric dtype (bool as
// uint8_t); false for other dtypes (f16 and bf16 included).
template <typename F>
bool VisitNumeric(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f(float{}); return true;
    case DType::kF64: f(double{}); return true;
    case DType::kI64: f(int64_t{}); return true;
    case DType::kI32: f(int32_t{}); return true;
    case DType::kI16: f(int16_t{}); return true;
    case DType::kI8: f(int8_t{}); return true;
    case DType::kU8:
    case DType::kBool: f(uint8_t{}); return true;
    default: return false;
  }
}

// The factory F for f32 when some input or output is f16: inputs are
// converted to f32 in scratch, F's kernel runs, f16 outputs are converted
// back. Constant f16 inputs are converted for F too.
Expected<TensorKernel> MakeViaF32(const TensorKernelArgs& args, TensorKernelFactory f);
template <TensorKernelFactory F>
Expected<TensorKernel> ViaF32(const TensorKernelArgs& args) {
  return MakeViaF32(args, F);
}

// "dtype X not supported by Op (what it takes)".
Status UnsupportedDType(const TensorKernelArgs& args, DType t, const char* supported);

}  // namespace kiln::cpu
