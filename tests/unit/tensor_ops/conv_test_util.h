// Shared helpers of the conv family's tests: seeded random tensors, running
// an op through inference and its kernel, and closeness checks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "graph/tensor_data.h"

namespace kiln::conv_test {

inline std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

inline int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

inline TensorData Floats(const std::vector<int64_t>& dims, const std::vector<float>& v) {
  return TensorData::FromValues<float>(DType::kF32, dims, v);
}

inline TensorData RandomTensor(const std::vector<int64_t>& dims, uint32_t seed) {
  return Floats(dims, RandomFloats(Count(dims), seed));
}

// max |a - b| <= tol * max(1, max |b|).
inline void ExpectClose(const float* a, const float* b, int64_t n, float tol, const std::string& what) {
  float max_b = 1.0f, max_diff = 0.0f;
  int64_t worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_b = std::max(max_b, std::fabs(b[i]));
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= max_diff)) {
      max_diff = d;
      worst = i;
    }
  }
  EXPECT_LE(max_diff, tol * max_b) << what << ": element " << worst << " is " << a[worst] << ", expected "
                                   << b[worst];
}

// Sets KILN_CONV for the scope (which convolution implementation runs).
class ScopedConvImpl {
 public:
  explicit ScopedConvImpl(const char* impl) {
    const char* old = std::getenv("KILN_CONV");
    if (old != nullptr) old_ = old;
    if (impl != nullptr) {
      setenv("KILN_CONV", impl, 1);
    } else {
      unsetenv("KILN_CONV");
    }
  }
  ~ScopedConvImpl() {
    if (old_) {
      setenv("KILN_CONV", old_->c_str(), 1);
    } else {
      unsetenv("KILN_CONV");
    }
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace kiln::conv_test
