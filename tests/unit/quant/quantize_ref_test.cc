// The reference Q8_0/Q4_0 quantizers: round trips through the dequantizer stay
// within the error the format allows, and the block layout is the documented one.
#include "quant/quantize_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/half.h"
#include "quant/dequantize.h"
#include "quant/ggml_blocks.h"

namespace kiln {
namespace quantize_ref_tests {

std::vector<float> Wave(int n) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::sin(0.37f * i) * (1.0f + 0.01f * i);
  return x;
}

TEST(QuantizeRef, Q8_0RoundTripWithinHalfAStep) {
  auto x = Wave(256);
  std::vector<BlockQ8_0> blocks(8);
  QuantizeQ8_0Ref(x.data(), blocks.data(), 256);
  std::vector<float> y(256);
  ASSERT_TRUE(DequantizeRow(DType::kQ8_0, blocks.data(), y.data(), 256).ok());
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    float step = amax / 127;
    EXPECT_NEAR(F16ToF32(blocks[b].d), step, step * 1e-3f);
    for (int i = 0; i < 32; ++i) {
      EXPECT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), 0.6f * step) << b * 32 + i;
    }
  }
}

TEST(QuantizeRef, Q4_0MapsTheExtremeToZeroAndStaysWithinAStep) {
  auto x = Wave(128);
  x[5] = -3.0f;  // the block's extreme, negative: d = 3/8
  std::vector<BlockQ4_0> blocks(4);
  QuantizeQ4_0Ref(x.data(), blocks.data(), 128);
  EXPECT_EQ(F16ToF32(blocks[0].d), 0.375f);
  EXPECT_EQ(blocks[0].qs[5] & 0x0F, 0);  // element 5 is the low nibble of byte 5
  std::vector<float> y(128);
  ASSERT_TRUE(DequantizeRow(DType::kQ4_0, blocks.data(), y.data(), 128).ok());
  EXPECT_EQ(y[5], -3.0f);
  for (int b = 0; b < 4; ++b) {
    float step = std::fabs(F16ToF32(blocks[b].d));
    // Values on the side opposite the extreme may clip from +8 steps to +7.
    for (int i = 0; i < 32; ++i) {
      EXPECT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), 1.01f * step) << b * 32 + i;
    }
  }
}

TEST(QuantizeRef, ZerosStayZeros) {
  std::vector<float> x(64, 0.0f), y(64, 1.0f);
  std::vector<uint8_t> q8(2 * sizeof(BlockQ8_0)), q4(2 * sizeof(BlockQ4_0));
  ASSERT_TRUE(QuantizeRowRef(DType::kQ8_0, x.data(), q8.data(), 64).ok());
  ASSERT_TRUE(DequantizeRow(DType::kQ8_0, q8.data(), y.data(), 64).ok());
  for (float v : y) EXPECT_EQ(v, 0.0f);
  ASSERT_TRUE(QuantizeRowRef(DType::kQ4_0, x.data(), q4.data(), 64).ok());
  ASSERT_TRUE(DequantizeRow(DType::kQ4_0, q4.data(), y.data(), 64).ok());
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(QuantizeRef, FloatConversionsAndErrors) {
  float x[2] = {1.0f / 3, -1e6f};
  uint16_t h[2];
  ASSERT_TRUE(QuantizeRowRef(DType::kF16, x, h, 2).ok());
  EXPECT_EQ(h[0], 0x3555);  // 1/3 in binary16: 0.0011 0101 0101 (rounded to nearest)
  EXPECT_EQ(h[1], 0xFC00);  // beyond 65504: -inf
  ASSERT_TRUE(QuantizeRowRef(DType::kBF16, x, h, 2).ok());
  EXPECT_EQ(h[0], 0x3EAB);  // 1/3 = 0x3EAAAAAB as float32, rounded to the top 16 bits
  EXPECT_EQ(QuantizeRowRef(DType::kQ8_0, x, h, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeRowRef(DType::kQ2_K, x, h, 256).code(), StatusCode::kUnsupported);
}

}  // namespace quantize_ref_tests
}  // namespace kiln
