// Float format conversions against values worked out by hand.
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln {
namespace half_tests {

TEST(Half, F16KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
}

TEST(Half, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), h) << "h=" << h;
  }
}

TEST(Half, F16RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: rounds up.
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // halfway above max: to inf
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);
}

TEST(Half, Bf16) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1+2^-7: ties to even.
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

TEST(Half, Fp8) {
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);     // 0.0111.000: 2^0
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);   // max finite
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_EQ(F8E5M2ToF32(0x3c), 1.0f);
  EXPECT_EQ(F8E5M2ToF32(0xc0), -2.0f);
}

}  // namespace half_tests
}  // namespace kiln
