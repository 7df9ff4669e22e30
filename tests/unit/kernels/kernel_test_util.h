// Shared helpers of the kernel tests: seeded random data, the ISAs to run,
// float comparisons in ulps.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/kernels/kernel_context.h"
#include "core/half.h"

namespace kiln::cpu::testing {

// Uniform floats in [lo, hi) from a fixed seed.
inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// The vector ISAs under test, with the scalar reference first. A test
// parameterized on these skips the ISAs this CPU cannot run.
inline std::vector<Isa> AllIsas() {
  return {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};
}
inline std::vector<Isa> VectorIsas() {
  return {Isa::kAvx2, Isa::kAvx512};
}

inline std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return IsaName(info.param);
}

#define KILN_SKIP_UNLESS_AVAILABLE(isa)                                                \
  do {                                                                                 \
    if (!::kiln::cpu::IsaAvailable(isa)) GTEST_SKIP() << "CPU lacks " << IsaName(isa); \
  } while (0)

// Distance in units in the last place between two finite floats of the same sign.
inline double UlpDistance(float a, float b) {
  if (a == b) return 0.0;
  const double scale = std::ldexp(1.0, std::ilogb(std::fmax(std::fabs(a), std::fabs(b))) - 23);
  return std::fabs(static_cast<double>(a) - static_cast<double>(b)) / scale;
}

// Bitwise equality of two float arrays (so that -0 != +0 and NaNs compare by payload).
inline bool BitEqual(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

inline std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = F32ToBf16(v[i]);
  return out;
}
inline std::vector<uint16_t> ToF16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = F32ToF16(v[i]);
  return out;
}

// A context with `threads` threads (1: no pool) and the given ISA.
inline KernelContext ContextFor(Isa isa, int threads) {
  KernelContext ctx;
  ctx.isa = isa;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  return ctx;
}

}  // namespace kiln::cpu::testing
