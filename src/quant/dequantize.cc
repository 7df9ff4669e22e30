// Reference dequantization: each block format written as the formula for one
// element, so that the bit positions can be checked against the format by eye.
#include "quant/dequantize.h"

#include <cstring>
#include <limits>

#include "core/half.h"
#include "quant/iquant_decode.h"

namespace kiln {
namespace {

// Blocks are copied out before reading, so sources at any alignment are fine.
template <typename Block>
Block LoadBlock(const void* src, int64_t index) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + index * static_cast<int64_t>(sizeof(Block)),
              sizeof(Block));
  return b;
}

// Doubles beyond float's range become infinities rather than undefined behaviour.
float NarrowToFloat(double v) {
  if (v > static_cast<double>(std::numeric_limits<float>::max())) {
    return std::numeric_limits<float>::infinity();
  }
  if (v < -static_cast<double>(std::numeric_limits<float>::max())) {
    return -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(v);
}

template <typename T>
T LoadScalar(const void* src, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(src) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// The 4-bit field of element i (0..31) in the shared Q4_0/Q4_1/Q5_x packing:
// byte i % 16, low nibble for the first half of the block, high for the second.
int LowBits32(const uint8_t qs[kQK / 2], int i) {
  uint8_t byte = qs[i % 16];
  return i < 16 ? (byte & 0x0F) : (byte >> 4);
}

// The 5th bit of element i (0..31) of a Q5_0/Q5_1 block.
int HighBit32(const uint8_t qh[4], int i) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> i) & 1u);
}

// The 2-bit field of element e (0..255) of a Q2_K/Q3_K block: each half of
// the block (128 values) uses 32 bytes; each byte holds, from its low bits
// up, elements e, e + 32, e + 64 and e + 96 of that half.
int TwoBits256(const uint8_t qs[kQK_K / 4], int e) {
  int half = e / 128;
  int group = (e % 128) / 32;
  return (qs[half * 32 + e % 32] >> (2 * group)) & 3;
}

// The 4-bit field of element e (0..255) of a Q4_K/Q5_K block: each 64-value
// chunk uses 32 bytes, low nibbles for its first 32 values, high for the rest.
int Nibble256(const uint8_t qs[kQK_K / 2], int e) {
  uint8_t byte = qs[(e / 64) * 32 + e % 32];
  return (e % 64) < 32 ? (byte & 0x0F) : (byte >> 4);
}

}  // namespace

void UnpackScaleMinK4(const uint8_t scales[kKScaleBytes], int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

int UnpackScaleQ3_K(const uint8_t scales[kKScaleBytes], int i) {
  int low = i < 8 ? (scales[i] & 0x0F) : (scales[i - 8] >> 4);
  int high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
  return low | (high << 4);
}

void DequantizeQ4_0(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    auto block = LoadBlock<BlockQ4_0>(src, b);
    float d = F16ToF32(block.d);
    for (int i = 0; i < kQK; ++i) {
      int q = LowBits32(block.qs, i);
      dst[b * kQK + i] = static_cast<float>(q - 8) * d;
    }
  }
}

void DequantizeQ4_1(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    auto block = LoadBlock<BlockQ4_1>(src, b);
    float d = F16ToF32(block.d);
    float m = F16ToF32(block.m);
    for (int i = 0; i < kQK; ++i) {
      int q = LowBits32(block.qs, i);
      dst[b * kQK + i] = static_cast<float>(q) * d + m;
    }
  }
}

void DequantizeQ5_0(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    auto block = LoadBlock<BlockQ5_0>(src, b);
    float d = F16ToF32(block.d);
    for (int i = 0; i < kQK; ++i) {
      int q = LowBits32(block.qs, i) | (HighBit32(block.qh, i) << 4);
      dst[b * kQK + i] = static_cast<float>(q - 16) * d;
    }
  }
}

void DequantizeQ5_1(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    auto block = LoadBlock<BlockQ5_1>(src, b);
    float d = F16ToF32(block.d);
    float m = F16ToF32(block.m);
    for (int i = 0; i < kQK; ++i) {
      int q = LowBits32(block.qs, i) | (HighBit32(block.qh, i) << 4);
      dst[b * kQK + i] = static_cast<float>(q) * d + m;
    }
  }
}

void DequantizeQ8_0(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    auto block = LoadBlock<BlockQ8_0>(src, b);
    float d = F16ToF32(block.d);
    for (int i = 0; i < kQK; ++i) dst[b * kQK + i] = static_cast<float>(block.qs[i]) * d;
  }
}

void DequantizeQ8_1(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    auto block = LoadBlock<BlockQ8_1>(src, b);
    float d = F16ToF32(block.d);
    for (int i = 0; i < kQK; ++i) dst[b * kQK + i] = static_cast<float>(block.qs[i]) * d;
  }
}

void DequantizeQ2_K(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    auto block = LoadBlock<BlockQ2_K>(src, b);
    float d = F16ToF32(block.d);
    float dmin = F16ToF32(block.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      uint8_t sc = block.scales[e / 16];
      float scale = d * static_cast<float>(sc & 0x0F);
      float min = dmin * static_cast<float>(sc >> 4);
      dst[b * kQK_K + e] = scale * static_cast<float>(TwoBits256(block.qs, e)) - min;
    }
  }
}

void DequantizeQ3_K(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    auto block = LoadBlock<BlockQ3_K>(src, b);
    float d = F16ToF32(block.d);
    for (int e = 0; e < kQK_K; ++e) {
      float scale = d * static_cast<float>(UnpackScaleQ3_K(block.scales, e / 16) - 32);
      // hmask byte e % 32, bit e / 32: a set bit means the value is not offset by -4.
      bool high = (block.hmask[e % 32] >> (e / 32)) & 1;
      int q = TwoBits256(block.qs, e) - (high ? 0 : 4);
      dst[b * kQK_K + e] = scale * static_cast<float>(q);
    }
  }
}

void DequantizeQ4_K(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    auto block = LoadBlock<BlockQ4_K>(src, b);
    float d = F16ToF32(block.d);
    float dmin = F16ToF32(block.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      int sc, m;
      UnpackScaleMinK4(block.scales, e / 32, &sc, &m);
      float scale = d * static_cast<float>(sc);
      float min = dmin * static_cast<float>(m);
      dst[b * kQK_K + e] = scale * static_cast<float>(Nibble256(block.qs, e)) - min;
    }
  }
}

void DequantizeQ5_K(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    auto block = LoadBlock<BlockQ5_K>(src, b);
    float d = F16ToF32(block.d);
    float dmin = F16ToF32(block.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      int sc, m;
      UnpackScaleMinK4(block.scales, e / 32, &sc, &m);
      float scale = d * static_cast<float>(sc);
      float min = dmin * static_cast<float>(m);
      // qh byte e % 32, bit e / 32 (the sub-block index) holds the 5th bit.
      int high = (block.qh[e % 32] >> (e / 32)) & 1;
      int q = Nibble256(block.qs, e) + 16 * high;
      dst[b * kQK_K + e] = scale * static_cast<float>(q) - min;
    }
  }
}

void DequantizeQ6_K(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    auto block = LoadBlock<BlockQ6_K>(src, b);
    float d = F16ToF32(block.d);
    for (int e = 0; e < kQK_K; ++e) {
      // Each half (128 values) uses 64 bytes of ql and 32 of qh. Within it,
      // value r = 32 * k + l takes ql byte l (k even) or l + 32 (k odd), low
      // nibble for k < 2, high for k >= 2, and bits 2k..2k+1 of qh byte l.
      int half = e / 128;
      int k = (e % 128) / 32;
      int l = e % 32;
      uint8_t low_byte = block.ql[half * 64 + (k % 2) * 32 + l];
      int low = k < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
      int high = (block.qh[half * 32 + l] >> (2 * k)) & 3;
      int q = (low | (high << 4)) - 32;
      dst[b * kQK_K + e] = d * static_cast<float>(block.scales[e / 16]) * static_cast<float>(q);
    }
  }
}

void DequantizeQ8_K(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    auto block = LoadBlock<BlockQ8_K>(src, b);
    for (int i = 0; i < kQK_K; ++i) dst[b * kQK_K + i] = block.d * static_cast<float>(block.qs[i]);
  }
}

int UnpackScaleIQ4_XS(const BlockIQ4_XS& block, int j) {
  const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
  const int high = (block.scales_h >> (2 * j)) & 3;
  return low | (high << 4);
}

// ggml's order: d * value (IQ4_NL), (d * (ls - 32)) * value (IQ4_XS).
void DequantizeIQ4_NL(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    auto block = LoadBlock<BlockIQ4_NL>(src, b);
    const float d = F16ToF32(block.d);
    for (int i = 0; i < kQK / 2; ++i) {
      dst[b * kQK + i] = d * static_cast<float>(kIQ4Values[block.qs[i] & 0x0F]);
      dst[b * kQK + i + kQK / 2] = d * static_cast<float>(kIQ4Values[block.qs[i] >> 4]);
    }
  }
}

void DequantizeIQ4_XS(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    auto block = LoadBlock<BlockIQ4_XS>(src, b);
    const float d = F16ToF32(block.d);
    for (int j = 0; j < kQK_K / kQK; ++j) {
      const float dl = d * static_cast<float>(UnpackScaleIQ4_XS(block, j) - 32);
      const uint8_t* qs = block.qs + 16 * j;
      float* out = dst + b * kQK_K + kQK * j;
      for (int i = 0; i < kQK / 2; ++i) {
        out[i] = dl * static_cast<float>(kIQ4Values[qs[i] & 0x0F]);
        out[i + kQK / 2] = dl * static_cast<float>(kIQ4Values[qs[i] >> 4]);
      }
    }
  }
}

// The grid i-quants through their integer form (quant/iquant_decode.h),
// (unit * scale) * w: ggml's value, whose (d * (0.5 + ls)) * 0.25 and
// (d / 8) * (2 ls + 1) are the same real number rounded once.
void DequantizeGridIQuant(DType dtype, const void* src, float* dst, int64_t n) {
  const int64_t block_bytes = GetDTypeInfo(dtype).block_bytes;
  IQuantBlock block;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    DecodeIQuantBlock(dtype, static_cast<const uint8_t*>(src) + b * block_bytes, &block);
    for (int i = 0; i < kQK_K; ++i) {
      dst[b * kQK_K + i] = (block.unit * static_cast<float>(block.scale[i / 16])) * static_cast<float>(block.w[i]);
    }
  }
}

void DequantizeIQ2_XXS(const void* src, float* dst, int64_t n) { DequantizeGridIQuant(DType::kIQ2_XXS, src, dst, n); }
void DequantizeIQ2_XS(const void* src, float* dst, int64_t n) { DequantizeGridIQuant(DType::kIQ2_XS, src, dst, n); }
void DequantizeIQ2_S(const void* src, float* dst, int64_t n) { DequantizeGridIQuant(DType::kIQ2_S, src, dst, n); }
void DequantizeIQ3_XXS(const void* src, float* dst, int64_t n) { DequantizeGridIQuant(DType::kIQ3_XXS, src, dst, n); }
void DequantizeIQ3_S(const void* src, float* dst, int64_t n) { DequantizeGridIQuant(DType::kIQ3_S, src, dst, n); }

Status DequantizeRow(DType dtype, const void* src, float* dst, int64_t n) {
  if (n < 0) return InvalidArgument("dequantize {}: negative element count {}", DTypeName(dtype), n);
  int block = DTypeBlockSize(dtype);
  if (n % block != 0) {
    return InvalidArgument("dequantize {}: {} elements is not a multiple of the block size {}",
                           DTypeName(dtype), n, block);
  }
  if (n == 0) return Status::Ok();
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(LoadScalar<uint16_t>(src, i));
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(LoadScalar<uint16_t>(src, i));
      break;
    case DType::kF64:
      for (int64_t i = 0; i < n; ++i) dst[i] = NarrowToFloat(LoadScalar<double>(src, i));
      break;
    case DType::kF8E4M3:
      for (int64_t i = 0; i < n; ++i) dst[i] = F8E4M3ToF32(LoadScalar<uint8_t>(src, i));
      break;
    case DType::kF8E5M2:
      for (int64_t i = 0; i < n; ++i) dst[i] = F8E5M2ToF32(LoadScalar<uint8_t>(src, i));
      break;
    case DType::kI64:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(LoadScalar<int64_t>(src, i));
      break;
    case DType::kI32:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(LoadScalar<int32_t>(src, i));
      break;
    case DType::kI16:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(LoadScalar<int16_t>(src, i));
      break;
    case DType::kI8:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(LoadScalar<int8_t>(src, i));
      break;
    case DType::kU8:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(LoadScalar<uint8_t>(src, i));
      break;
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) dst[i] = LoadScalar<uint8_t>(src, i) != 0 ? 1.0f : 0.0f;
      break;
    case DType::kQ4_0: DequantizeQ4_0(src, dst, n); break;
    case DType::kQ4_1: DequantizeQ4_1(src, dst, n); break;
    case DType::kQ5_0: DequantizeQ5_0(src, dst, n); break;
    case DType::kQ5_1: DequantizeQ5_1(src, dst, n); break;
    case DType::kQ8_0: DequantizeQ8_0(src, dst, n); break;
    case DType::kQ8_1: DequantizeQ8_1(src, dst, n); break;
    case DType::kQ2_K: DequantizeQ2_K(src, dst, n); break;
    case DType::kQ3_K: DequantizeQ3_K(src, dst, n); break;
    case DType::kQ4_K: DequantizeQ4_K(src, dst, n); break;
    case DType::kQ5_K: DequantizeQ5_K(src, dst, n); break;
    case DType::kQ6_K: DequantizeQ6_K(src, dst, n); break;
    case DType::kQ8_K: DequantizeQ8_K(src, dst, n); break;
    case DType::kIQ4_NL: DequantizeIQ4_NL(src, dst, n); break;
    case DType::kIQ4_XS: DequantizeIQ4_XS(src, dst, n); break;
    case DType::kIQ2_XXS: DequantizeIQ2_XXS(src, dst, n); break;
    case DType::kIQ2_XS: DequantizeIQ2_XS(src, dst, n); break;
    case DType::kIQ2_S: DequantizeIQ2_S(src, dst, n); break;
    case DType::kIQ3_XXS: DequantizeIQ3_XXS(src, dst, n); break;
    case DType::kIQ3_S: DequantizeIQ3_S(src, dst, n); break;
  }
  return Status::Ok();
}

}  // namespace kiln
