// SiLU on its own (scalar: libm's expf, no vector form): the threaded
// kernel against the plain loop bit for bit, and the loop against the
// double-precision definition.
#include "backend/cpu/kernels/silu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"

namespace kiln::cpu {
namespace silu_tests {

using testing::ContextFor;
using testing::RandomFloats;

TEST(Silu, MatchesTheReferenceBitForBitOnAnyThreadsAndStrides) {
  const int64_t rows = 37, cols = 1000, ldx = 1003, ld_out = 1010;
  std::vector<float> x = RandomFloats(static_cast<size_t>(rows * ldx), 21, -30.0f, 30.0f);
  std::vector<float> want(static_cast<size_t>(rows * ld_out), 9.0f);
  ref::Silu(rows, cols, x.data(), ldx, want.data(), ld_out);
  for (int threads : {1, 3, 4}) {
    std::vector<float> got(want.size(), 9.0f);
    Silu(ContextFor(BestIsa(), threads), rows, cols, x.data(), ldx, got.data(), ld_out);
    EXPECT_TRUE(testing::BitEqual(got.data(), want.data(), got.size())) << threads << " threads";
  }
  // In place.
  std::vector<float> inplace = x;
  Silu(ContextFor(BestIsa(), 2), rows, cols, inplace.data(), ldx, inplace.data(), ldx);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(inplace[static_cast<size_t>(r * ldx + c)], want[static_cast<size_t>(r * ld_out + c)]);
    }
  }
}

TEST(SiluReference, IsWithinTwoUlpsOfTheDefinitionAndHandlesTheEnds) {
  std::vector<float> x = RandomFloats(20000, 5, -20.0f, 20.0f);
  std::vector<float> y(x.size());
  ref::Silu(1, static_cast<int64_t>(x.size()), x.data(), 0, y.data(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] / (1.0 + std::exp(-static_cast<double>(x[i])));
    if (std::fabs(want) < 1e-30) continue;
    EXPECT_LE(testing::UlpDistance(y[i], static_cast<float>(want)), 2.0) << "at " << x[i];
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ends = {0.0f, 100.0f, -100.0f, inf};
  std::vector<float> out(ends.size());
  ref::Silu(1, static_cast<int64_t>(ends.size()), ends.data(), 0, out.data(), 0);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 100.0f);
  EXPECT_LE(std::fabs(out[2]), 1e-40f);
  EXPECT_EQ(out[3], inf);
}

}  // namespace silu_tests
}  // namespace kiln::cpu
