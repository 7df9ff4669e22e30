// Reference dequantization against block math worked out in the test: each
// block is built from chosen quants and scales with a packer written the way
// ggml's quantizers lay the bits out (loop by loop), and the expected values
// come from the format's formula, never from the code under test.
#include "quant/dequantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "quant/ggml_blocks.h"

namespace kiln {
namespace dequantize_tests {

uint16_t H(float f) {
  return F32ToF16(f);
}

template <typename Block>
std::vector<float> DequantizeBlock(DType dtype, const Block& block, int n) {
  std::vector<float> out(n, -12345.0f);
  Status s = DequantizeRow(dtype, &block, out.data(), n);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(Dequantize, BlockStructsMatchTheDTypeTable) {
  EXPECT_EQ(GetDTypeInfo(DType::kQ4_0).block_bytes, static_cast<int>(sizeof(BlockQ4_0)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ4_1).block_bytes, static_cast<int>(sizeof(BlockQ4_1)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ5_0).block_bytes, static_cast<int>(sizeof(BlockQ5_0)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ5_1).block_bytes, static_cast<int>(sizeof(BlockQ5_1)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ8_0).block_bytes, static_cast<int>(sizeof(BlockQ8_0)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ8_1).block_bytes, static_cast<int>(sizeof(BlockQ8_1)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ2_K).block_bytes, static_cast<int>(sizeof(BlockQ2_K)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ3_K).block_bytes, static_cast<int>(sizeof(BlockQ3_K)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ4_K).block_bytes, static_cast<int>(sizeof(BlockQ4_K)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ5_K).block_bytes, static_cast<int>(sizeof(BlockQ5_K)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ6_K).block_bytes, static_cast<int>(sizeof(BlockQ6_K)));
  EXPECT_EQ(GetDTypeInfo(DType::kQ8_K).block_bytes, static_cast<int>(sizeof(BlockQ8_K)));
  EXPECT_EQ(GetDTypeInfo(DType::kIQ2_XXS).block_bytes, static_cast<int>(sizeof(BlockIQ2_XXS)));
  EXPECT_EQ(GetDTypeInfo(DType::kIQ2_XS).block_bytes, static_cast<int>(sizeof(BlockIQ2_XS)));
  EXPECT_EQ(GetDTypeInfo(DType::kIQ2_S).block_bytes, static_cast<int>(sizeof(BlockIQ2_S)));
  EXPECT_EQ(GetDTypeInfo(DType::kIQ3_XXS).block_bytes, static_cast<int>(sizeof(BlockIQ3_XXS)));
  EXPECT_EQ(GetDTypeInfo(DType::kIQ3_S).block_bytes, static_cast<int>(sizeof(BlockIQ3_S)));
}

// ---- the 32-value formats ----

TEST(Dequantize, Q4_0) {
  // d = 0.5; byte j holds q = j (element j) and q = 15 - j (element j + 16).
  BlockQ4_0 b;
  b.d = H(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = DequantizeBlock(DType::kQ4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8)) << j;
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j - 8)) << j;
  }
  EXPECT_EQ(y[0], -4.0f);  // q = 0 is the most negative value, -8 d
  EXPECT_EQ(y[16], 3.5f);  // q = 15 is +7 d
}

TEST(Dequantize, Q4_1) {
  // value = d q + m with d = 0.25, m = -1.
  BlockQ4_1 b;
  b.d = H(0.25f);
  b.m = H(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = DequantizeBlock(DType::kQ4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * j - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.25f * (15 - j) - 1.0f) << j;
  }
  EXPECT_EQ(y[16], 2.75f);  // 15 * 0.25 - 1
}

TEST(Dequantize, Q5_0) {
  // qh = 0xAAAA5555 (little endian): element i's 5th bit is bit i.
  BlockQ5_0 b;
  b.d = H(1.0f);
  uint32_t qh = 0xAAAA5555u;
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = DequantizeBlock(DType::kQ5_0, b, 32);
  for (int i = 0; i < 32; ++i) {
    int low = i < 16 ? i : 15 - (i - 16);
    int high = (qh >> i) & 1;
    EXPECT_EQ(y[i], static_cast<float>(low + 16 * high - 16)) << i;
  }
  EXPECT_EQ(y[0], 0.0f);    // low 0, bit 0 set: 16 - 16
  EXPECT_EQ(y[1], -15.0f);  // low 1, bit 1 clear
  EXPECT_EQ(y[31], 0.0f);   // low 0 (15 - 15), bit 31 set
}

TEST(Dequantize, Q5_1) {
  BlockQ5_1 b;
  b.d = H(0.5f);
  b.m = H(2.0f);
  uint32_t qh = 0xFFFF0000u;  // the second half has the 5th bit
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  auto y = DequantizeBlock(DType::kQ5_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j + 2.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * (j + 16) + 2.0f) << j;
  }
  EXPECT_EQ(y[31], 17.5f);  // q = 31: 15.5 + 2
}

TEST(Dequantize, Q8_0AndQ8_1) {
  BlockQ8_0 b;
  b.d = H(0.125f);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i * 8 - 128);
  b.qs[31] = 127;
  auto y = DequantizeBlock(DType::kQ8_0, b, 32);
  for (int i = 0; i < 31; ++i) EXPECT_EQ(y[i], 0.125f * (i * 8 - 128)) << i;
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[31], 15.875f);

  BlockQ8_1 c;
  c.d = H(2.0f);
  c.s = H(1000.0f);  // a cached sum: not part of the values
  for (int i = 0; i < 32; ++i) c.qs[i] = static_cast<int8_t>(i - 16);
  auto z = DequantizeBlock(DType::kQ8_1, c, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(z[i], 2.0f * (i - 16)) << i;
}

// ---- k-quants: packers in ggml's loop order ----

// Q2_K: L[e] in 0..3, 4-bit scale sc[s] and min m[s] per 16 values.
BlockQ2_K PackQ2_K(const int* L, const int* sc, const int* m, float d, float dmin) {
  BlockQ2_K b{};
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(sc[j] | (m[j] << 4));
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      b.qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
  b.d = H(d);
  b.dmin = H(dmin);
  return b;
}

TEST(Dequantize, Q2_K) {
  int L[256], sc[16], m[16];
  for (int e = 0; e < 256; ++e) L[e] = (e * 7 + e / 64) % 4;
  for (int s = 0; s < 16; ++s) {
    sc[s] = (s * 5 + 1) % 16;
    m[s] = (s * 3 + 2) % 16;
  }
  auto b = PackQ2_K(L, sc, m, 0.5f, 0.25f);
  auto y = DequantizeBlock(DType::kQ2_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    float expected = 0.5f * sc[e / 16] * L[e] - 0.25f * m[e / 16];
    EXPECT_EQ(y[e], expected) << e;
  }
  // Element 37 by hand: sub-block 2 (sc 11, m 8), qs[5] bits 2-3 hold L[37] = 3.
  EXPECT_EQ(sc[2], 11);
  EXPECT_EQ(m[2], 8);
  EXPECT_EQ((b.qs[5] >> 2) & 3, L[37]);
  EXPECT_EQ(y[37], 0.5f * 11 * L[37] - 0.25f * 8);
}

// Q3_K: L[e] in 0..7 (value L - 4), 6-bit scales (value scale - 32).
BlockQ3_K PackQ3_K(const int* L_in, const int* scales, float d) {
  BlockQ3_K b{};
  for (int j = 0; j < 16; ++j) {
    int l = scales[j];
    if (j < 8) {
      b.scales[j] = static_cast<uint8_t>(l & 0xF);
    } else {
      b.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
    }
    l >>= 4;
    b.scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
  }
  int L[256];
  std::memcpy(L, L_in, sizeof(L));
  int m = 0;
  uint8_t hm = 1;
  for (int j = 0; j < 256; ++j) {
    if (L[j] > 3) {
      b.hmask[m] |= hm;
      L[j] -= 4;
    }
    if (++m == 32) {
      m = 0;
      hm = static_cast<uint8_t>(hm << 1);
    }
  }
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      b.qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
  b.d = H(d);
  return b;
}

TEST(Dequantize, Q3_K) {
  int L[256], scales[16];
  for (int e = 0; e < 256; ++e) L[e] = (e * 5 + e / 32) % 8;
  for (int s = 0; s < 16; ++s) scales[s] = (s * 13 + 7) % 64;
  auto b = PackQ3_K(L, scales, 0.25f);
  auto y = DequantizeBlock(DType::kQ3_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    float expected = 0.25f * (scales[e / 16] - 32) * (L[e] - 4);
    EXPECT_EQ(y[e], expected) << e;
  }
  for (int s = 0; s < 16; ++s) EXPECT_EQ(UnpackScaleQ3_K(b.scales, s), scales[s]) << s;
  // Sub-block 13 by hand: scale (13*13+7) % 64 = 48, low nibble 0 in the high
  // half of byte 5, high bits 3 in bits 6-7 of byte 9.
  EXPECT_EQ(scales[13], 48);
  EXPECT_EQ(b.scales[5] >> 4, 0);
  EXPECT_EQ((b.scales[9] >> 6) & 3, 3);
}

TEST(Dequantize, Q3_KExtremeScales) {
  // Scale 0 means -32, scale 63 means +31; hmask set everywhere means no -4.
  BlockQ3_K b{};
  std::memset(b.hmask, 0xFF, sizeof(b.hmask));
  std::memset(b.qs, 0xFF, sizeof(b.qs));  // every 2-bit field is 3
  b.scales[0] = 0x0F;                     // sub-block 0: low 15, high bits 0 from byte 8
  b.scales[8] = 0x03;                     // sub-block 0: high 3 -> 63
  b.d = H(1.0f);
  auto y = DequantizeBlock(DType::kQ3_K, b, 256);
  EXPECT_EQ(y[0], 31.0f * 3);    // (63 - 32) * 3
  EXPECT_EQ(y[16], -32.0f * 3);  // sub-block 1: scale 0
}

// Q4_K / Q5_K: 8 sub-blocks of 32, 6-bit scale and min packed into 12 bytes.
void PackScaleMinK4(const int* ls, const int* lm, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(ls[j]);
      scales[j + 4] = static_cast<uint8_t>(lm[j]);
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

TEST(Dequantize, Q4_K) {
  int L[256], ls[8], lm[8];
  for (int e = 0; e < 256; ++e) L[e] = (e * 11 + e / 32) % 16;
  for (int s = 0; s < 8; ++s) {
    ls[s] = (s * 23 + 5) % 64;
    lm[s] = (s * 37 + 60) % 64;
  }
  BlockQ4_K b{};
  b.d = H(0.5f);
  b.dmin = H(0.125f);
  PackScaleMinK4(ls, lm, b.scales);
  for (int n = 0; n < 256; n += 64) {
    for (int l = 0; l < 32; ++l) b.qs[n / 2 + l] = static_cast<uint8_t>(L[n + l] | (L[n + l + 32] << 4));
  }
  auto y = DequantizeBlock(DType::kQ4_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    float expected = 0.5f * ls[e / 32] * L[e] - 0.125f * lm[e / 32];
    EXPECT_EQ(y[e], expected) << e;
  }
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    UnpackScaleMinK4(b.scales, s, &sc, &m);
    EXPECT_EQ(sc, ls[s]) << s;
    EXPECT_EQ(m, lm[s]) << s;
  }
}

TEST(Dequantize, Q4_KMaxScaleAndMin) {
  // Sub-block 7 with scale 63 and min 63: its 6 bits are split between
  // byte 11 (low nibbles) and the top bits of bytes 3 (scale) and 7 (min).
  BlockQ4_K b{};
  b.d = H(1.0f);
  b.dmin = H(1.0f);
  b.scales[11] = 0xFF;
  b.scales[3] = 0xC0;
  b.scales[7] = 0xC0;
  std::memset(b.qs, 0xFF, sizeof(b.qs));
  auto y = DequantizeBlock(DType::kQ4_K, b, 256);
  EXPECT_EQ(y[255], 63.0f * 15 - 63.0f);
  // Sub-block 3 takes the low 6 bits of bytes 3 and 7: both 0.
  EXPECT_EQ(y[96], 0.0f);
}

TEST(Dequantize, Q5_K) {
  int L[256], ls[8], lm[8];
  for (int e = 0; e < 256; ++e) L[e] = (e * 13 + e / 16) % 32;
  for (int s = 0; s < 8; ++s) {
    ls[s] = (s * 29 + 3) % 64;
    lm[s] = (s * 17 + 41) % 64;
  }
  BlockQ5_K b{};
  b.d = H(0.25f);
  b.dmin = H(0.5f);
  PackScaleMinK4(ls, lm, b.scales);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < 256; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        b.qh[j] |= m1;
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        b.qh[j] |= m2;
      }
      b.qs[n / 2 + j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
  }
  auto y = DequantizeBlock(DType::kQ5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    float expected = 0.25f * ls[e / 32] * L[e] - 0.5f * lm[e / 32];
    EXPECT_EQ(y[e], expected) << e;
  }
}

TEST(Dequantize, Q6_K) {
  int L[256];
  int8_t scales[16];
  for (int e = 0; e < 256; ++e) L[e] = (e * 19 + e / 8) % 64;
  for (int s = 0; s < 16; ++s) scales[s] = static_cast<int8_t>(s * 17 - 128);  // -128 .. 127
  BlockQ6_K b{};
  for (int s = 0; s < 16; ++s) b.scales[s] = scales[s];
  b.d = H(0.0625f);
  for (int j = 0; j < 256; j += 128) {
    uint8_t* ql = b.ql + j / 2;
    uint8_t* qh = b.qh + j / 4;
    for (int l = 0; l < 32; ++l) {
      int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                   ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
    }
  }
  auto y = DequantizeBlock(DType::kQ6_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    float expected = 0.0625f * scales[e / 16] * (L[e] - 32);
    EXPECT_EQ(y[e], expected) << e;
  }
  // Sub-block 15 has scale 127 (15 * 17 - 128); sub-block 0 has -128.
  EXPECT_EQ(scales[15], 127);
  EXPECT_EQ(scales[0], -128);
}

TEST(Dequantize, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.001f;
  for (int i = 0; i < 256; ++i) b.qs[i] = static_cast<int8_t>(i - 128);
  auto y = DequantizeBlock(DType::kQ8_K, b, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.001f * static_cast<float>(i - 128)) << i;
}

TEST(Dequantize, IQ4_NL) {
  // Byte j: index j (element j) and 15 - j (element j + 16); d = 0.5.
  BlockIQ4_NL b;
  b.d = H(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = DequantizeBlock(DType::kIQ4_NL, b, 32);
  const int values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(values[j])) << j;
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(values[15 - j])) << j;
  }
}

TEST(Dequantize, IQ4_XS) {
  // Sub-block j's 6-bit scale is 32 + j - 4 (so sub-scales -4..3 steps of
  // d = 0.25), split into scales_l's nibbles and scales_h's 2-bit fields;
  // element i of sub-block j has index (i + j) % 16.
  BlockIQ4_XS b{};
  b.d = H(0.25f);
  for (int j = 0; j < 8; ++j) {
    const int ls = 32 + j - 4;
    b.scales_l[j / 2] = static_cast<uint8_t>(b.scales_l[j / 2] | ((ls & 15) << (4 * (j % 2))));
    b.scales_h = static_cast<uint16_t>(b.scales_h | ((ls >> 4) << (2 * j)));
    for (int i = 0; i < 16; ++i) {
      b.qs[16 * j + i] = static_cast<uint8_t>(((i + j) % 16) | (((i + 16 + j) % 16) << 4));
    }
  }
  auto y = DequantizeBlock(DType::kIQ4_XS, b, 256);
  for (int j = 0; j < 8; ++j) {
    const float dl = 0.25f * static_cast<float>(j - 4);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(y[32 * j + i], dl * static_cast<float>(kIQ4Values[(i + j) % 16])) << j << " " << i;
    }
  }
  EXPECT_EQ(UnpackScaleIQ4_XS(b, 7), 35);
}

// ---- the grid i-quants: grid entries as ggml's tables give them ----

// Little-endian bytes of a uint32 into p.
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

TEST(Dequantize, IQ2_XXS) {
  // d = 1. Sub-block 0: grid indices 0, 1, 2, 255; sign bits 0b1 (group 0:
  // one minus sign, so the eighth is negative too), 0, 0b11, 0; ls = 3, so
  // the step is (0.5 + 3) / 4 = 0.875. Sub-blocks 1-7 are all zero bytes:
  // entry 0 (eight 8s), no signs, ls = 0: 8 * 0.125 = 1.
  BlockIQ2_XXS b{};
  b.d = H(1.0f);
  b.qs[0] = 0;
  b.qs[1] = 1;
  b.qs[2] = 2;
  b.qs[3] = 255;
  PutU32(b.qs + 4, 1u | (0u << 7) | (3u << 14) | (0u << 21) | (3u << 28));
  auto y = DequantizeBlock(DType::kIQ2_XXS, b, 256);
  // Entries: 0x0808080808080808, 0x080808080808082b, 0x0808080808081919,
  // 0x2b2b2b1908081908 (lowest byte first: weight 0).
  const int expected[32] = {-8, 8, 8, 8, 8, 8, 8,  -8, 43,  8,  8, 8, 8, 8,  8,  8,
                            -25, -25, 8, 8, 8, 8, 8, 8, 8, 25, 8, 8, 25, 43, 43, 43};
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.875f * static_cast<float>(expected[i])) << i;
  for (int i = 32; i < 256; ++i) EXPECT_EQ(y[i], 1.0f) << i;
}

TEST(Dequantize, IQ2_XS) {
  // d = 1. Group 0: index 1 with sign bits 0b1 (weights 0 and 7 negative);
  // groups 1-3 index 0. scales[0] = 0x52: groups 0-1 ls = 2 (step 0.625),
  // groups 2-3 ls = 5 (step 1.375). The rest: eights at 0.125.
  BlockIQ2_XS b{};
  b.d = H(1.0f);
  const uint16_t group0 = 1 | (1 << 9);
  std::memcpy(b.qs, &group0, 2);
  b.scales[0] = 0x52;
  auto y = DequantizeBlock(DType::kIQ2_XS, b, 256);
  const int group0_values[8] = {-43, 8, 8, 8, 8, 8, 8, -8};  // entry 1: 0x080808080808082b
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 0.625f * static_cast<float>(group0_values[i])) << i;
  for (int i = 8; i < 16; ++i) EXPECT_EQ(y[i], 5.0f) << i;
  for (int i = 16; i < 32; ++i) EXPECT_EQ(y[i], 11.0f) << i;
  for (int i = 32; i < 256; ++i) EXPECT_EQ(y[i], 1.0f) << i;
}

TEST(Dequantize, IQ2_S) {
  // d = 1. Group 0: index 9 (0x08080808082b0808), signs 0x80 (weight 7
  // negative; all 8 signs are stored). Group 1: low byte 0, high bits 1
  // (bits 2-3 of qh[0]): index 256 (0x0819081919191919). scales[0] = 0x31:
  // groups 0-1 step (0.5 + 1) / 4, groups 2-3 (0.5 + 3) / 4.
  BlockIQ2_S b{};
  b.d = H(1.0f);
  b.qs[0] = 9;
  b.signs[0] = 0x80;
  b.qh[0] = 1 << 2;
  b.scales[0] = 0x31;
  auto y = DequantizeBlock(DType::kIQ2_S, b, 256);
  const int expected[16] = {8, 8, 43, 8, 8, 8, 8, -8, 25, 25, 25, 25, 25, 8, 25, 8};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(y[i], 0.375f * static_cast<float>(expected[i])) << i;
  for (int i = 16; i < 32; ++i) EXPECT_EQ(y[i], 7.0f) << i;
  for (int i = 32; i < 256; ++i) EXPECT_EQ(y[i], 1.0f) << i;
}

TEST(Dequantize, IQ3_XXS) {
  // d = 2. Sub-block 0: groups of 4 with indices 0 (0x04040404) and 5
  // (0x04040c3e), the rest 0; its uint32 has ls = 1 (step 2 * 1.5 / 2 = 1.5)
  // and sign bits 0b1000000 for the first 8 (weight 6 negative, so 7 too).
  // Sub-blocks 1-7: fours at 2 * 0.5 / 2 = 0.5.
  BlockIQ3_XXS b{};
  b.d = H(2.0f);
  b.qs[1] = 5;
  PutU32(b.scales_signs, (1u << 28) | (1u << 6));
  auto y = DequantizeBlock(DType::kIQ3_XXS, b, 256);
  const int expected[8] = {4, 4, 4, 4, 62, 12, -4, -4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 1.5f * static_cast<float>(expected[i])) << i;
  for (int i = 8; i < 32; ++i) EXPECT_EQ(y[i], 6.0f) << i;
  for (int i = 32; i < 256; ++i) EXPECT_EQ(y[i], 2.0f) << i;
}

TEST(Dequantize, IQ3_S) {
  // d = 0.5, scales[0] = 0x21: sub-block 0 step 0.5 * (1 + 2) = 1.5,
  // sub-block 1 step 0.5 * (1 + 4) = 2.5, the rest 0.5. Group 0: qs 0 with
  // qh[0] bit 0: index 256 (0x05090507); group 1: index 3 (0x0101010b);
  // signs[0] = 0x11: weights 0 and 4 negative. Other groups: entry 0, ones.
  BlockIQ3_S b{};
  b.d = H(0.5f);
  b.scales[0] = 0x21;
  b.qh[0] = 1;
  b.qs[1] = 3;
  b.signs[0] = 0x11;
  auto y = DequantizeBlock(DType::kIQ3_S, b, 256);
  const int expected[8] = {-7, 5, 9, 5, -11, 1, 1, 1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 1.5f * static_cast<float>(expected[i])) << i;
  for (int i = 8; i < 32; ++i) EXPECT_EQ(y[i], 1.5f) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(y[i], 2.5f) << i;
  for (int i = 64; i < 256; ++i) EXPECT_EQ(y[i], 0.5f) << i;
}

// ---- all formats: zeros, extremes, errors ----

TEST(Dequantize, AllZeroBlocksGiveZeros) {
  const DType kTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ8_1,
                          DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K,
                          DType::kIQ4_NL, DType::kIQ4_XS, DType::kIQ2_XXS, DType::kIQ2_XS, DType::kIQ2_S,
                          DType::kIQ3_XXS, DType::kIQ3_S};
  for (DType t : kTypes) {
    std::vector<uint8_t> zeros(2 * GetDTypeInfo(t).block_bytes, 0);
    int n = 2 * DTypeBlockSize(t);
    std::vector<float> y(n, 7.0f);
    ASSERT_TRUE(DequantizeRow(t, zeros.data(), y.data(), n).ok());
    for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.0f) << DTypeName(t) << " element " << i;
  }
}

TEST(Dequantize, ExtremeScalesStayExact) {
  // The largest finite f16 scale, 65504, times the largest quant.
  BlockQ8_0 b{};
  b.d = 0x7BFF;
  b.qs[0] = 127;
  b.qs[1] = -128;
  std::vector<float> y(32);
  ASSERT_TRUE(DequantizeRow(DType::kQ8_0, &b, y.data(), 32).ok());
  EXPECT_EQ(y[0], 65504.0f * 127);
  EXPECT_EQ(y[1], 65504.0f * -128);

  // The smallest f16 subnormal, 2^-24, as the Q4_0 scale.
  BlockQ4_0 c{};
  c.d = 0x0001;
  std::memset(c.qs, 0xFF, sizeof(c.qs));
  ASSERT_TRUE(DequantizeRow(DType::kQ4_0, &c, y.data(), 32).ok());
  EXPECT_EQ(y[5], std::ldexp(7.0f, -24));

  // An infinite Q6_K scale gives infinities of the quant's sign, and 0 * inf = NaN.
  BlockQ6_K k{};
  k.d = 0x7C00;
  for (int s = 0; s < 16; ++s) k.scales[s] = 1;
  std::vector<float> z(256);
  ASSERT_TRUE(DequantizeRow(DType::kQ6_K, &k, z.data(), 256).ok());
  EXPECT_TRUE(std::isinf(z[0]) && z[0] < 0);  // q = 0 - 32
}

TEST(Dequantize, PlainTypes) {
  float f32[3] = {1.5f, -2.0f, 1e-30f};
  std::vector<float> y(3);
  ASSERT_TRUE(DequantizeRow(DType::kF32, f32, y.data(), 3).ok());
  EXPECT_EQ(y[2], 1e-30f);

  uint16_t f16[3] = {0x3C00, 0xC000, 0x7BFF};  // 1, -2, 65504
  ASSERT_TRUE(DequantizeRow(DType::kF16, f16, y.data(), 3).ok());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 65504.0f);

  uint16_t bf16[2] = {0x3F80, 0xC0A0};  // 1, -5
  ASSERT_TRUE(DequantizeRow(DType::kBF16, bf16, y.data(), 2).ok());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -5.0f);

  double f64[3] = {0.25, -1e300, 1e-300};
  ASSERT_TRUE(DequantizeRow(DType::kF64, f64, y.data(), 3).ok());
  EXPECT_EQ(y[0], 0.25f);
  EXPECT_TRUE(std::isinf(y[1]) && y[1] < 0);
  EXPECT_EQ(y[2], 0.0f);

  // E4M3: 0x38 = 0.0111.000 = 2^(7-7) = 1; 0x7E = 0.1111.110 = 1.75 * 2^8 = 448
  // (the largest); 0x01 = 2^-9 (the smallest subnormal).
  uint8_t e4m3[3] = {0x38, 0x7E, 0x01};
  ASSERT_TRUE(DequantizeRow(DType::kF8E4M3, e4m3, y.data(), 3).ok());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 448.0f);
  EXPECT_EQ(y[2], std::ldexp(1.0f, -9));

  // E5M2: 0x3C = 0.01111.00 = 1; 0xC0 = 1.10000.00 = -2.
  uint8_t e5m2[2] = {0x3C, 0xC0};
  ASSERT_TRUE(DequantizeRow(DType::kF8E5M2, e5m2, y.data(), 2).ok());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);

  int64_t i64[2] = {-3, int64_t{1} << 40};
  ASSERT_TRUE(DequantizeRow(DType::kI64, i64, y.data(), 2).ok());
  EXPECT_EQ(y[0], -3.0f);
  EXPECT_EQ(y[1], std::ldexp(1.0f, 40));
  int32_t i32[1] = {-70000};
  ASSERT_TRUE(DequantizeRow(DType::kI32, i32, y.data(), 1).ok());
  EXPECT_EQ(y[0], -70000.0f);
  int16_t i16[1] = {-32768};
  ASSERT_TRUE(DequantizeRow(DType::kI16, i16, y.data(), 1).ok());
  EXPECT_EQ(y[0], -32768.0f);
  int8_t i8[1] = {-128};
  ASSERT_TRUE(DequantizeRow(DType::kI8, i8, y.data(), 1).ok());
  EXPECT_EQ(y[0], -128.0f);
  uint8_t u8[1] = {255};
  ASSERT_TRUE(DequantizeRow(DType::kU8, u8, y.data(), 1).ok());
  EXPECT_EQ(y[0], 255.0f);
  uint8_t flags[3] = {0, 1, 2};
  ASSERT_TRUE(DequantizeRow(DType::kBool, flags, y.data(), 3).ok());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 1.0f);
}

TEST(Dequantize, UnalignedSourcesAreFine) {
  // A Q8_K block (which holds a float) one byte past an aligned address.
  std::vector<uint8_t> bytes(sizeof(BlockQ8_K) + 1);
  BlockQ8_K b{};
  b.d = 0.5f;
  b.qs[3] = -4;
  std::memcpy(bytes.data() + 1, &b, sizeof(b));
  std::vector<float> y(256);
  ASSERT_TRUE(DequantizeRow(DType::kQ8_K, bytes.data() + 1, y.data(), 256).ok());
  EXPECT_EQ(y[3], -2.0f);
}

TEST(Dequantize, RejectsPartialBlocks) {
  std::vector<uint8_t> bytes(64);
  std::vector<float> y(64);
  Status s = DequantizeRow(DType::kQ4_0, bytes.data(), y.data(), 33);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q4_0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("33"), std::string::npos) << s.message();
  EXPECT_FALSE(DequantizeRow(DType::kF32, bytes.data(), y.data(), -1).ok());
  EXPECT_TRUE(DequantizeRow(DType::kQ6_K, nullptr, nullptr, 0).ok());
}

}  // namespace dequantize_tests
}  // namespace kiln
