// Reading the quantized ops' scales and zero points (per tensor or per
// axis, any of the dtypes ONNX allows) and ONNX's rounding to an 8-bit
// value: half to even, then saturation.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace kiln::cpu {

// Element i of a u8, i8 or i32 tensor as int32; 0 for a null pointer (an
// omitted zero point).
inline int32_t ReadInt(DType dtype, const void* p, int64_t i) {
  if (p == nullptr) return 0;
  switch (dtype) {
    case DType::kU8: return static_cast<const uint8_t*>(p)[i];
    case DType::kI8: return static_cast<const int8_t*>(p)[i];
    case DType::kI32: return static_cast<const int32_t*>(p)[i];
    default: return 0;
  }
}

// round-half-to-even(v) + zero_point, clamped to [lo, hi]; NaN gives the
// zero point (clamped). Adding and subtracting 1.5 * 2^23 rounds any |v| <
// 2^22 to an integer, ties to even, in the default rounding mode (v is
// clamped first, far outside any 8-bit range); plain arithmetic, so that
// the loops calling it vectorize.
inline float RoundHalfEvenClamped(float v, float zero_point, float lo, float hi) {
  constexpr float kMagic = 12582912.0f;
  v = v == v ? v : 0.0f;
  v = v < -4.0e6f ? -4.0e6f : (v > 4.0e6f ? 4.0e6f : v);
  float r = ((v + kMagic) - kMagic) + zero_point;
  return r < lo ? lo : (r > hi ? hi : r);
}

// The same to an int32 in dtype's range (u8 or i8).
inline int32_t SaturateRound(float v, int32_t zero_point, DType dtype) {
  const float lo = dtype == DType::kI8 ? -128.0f : 0.0f, hi = dtype == DType::kI8 ? 127.0f : 255.0f;
  return static_cast<int32_t>(RoundHalfEvenClamped(v, static_cast<float>(zero_point), lo, hi));
}

inline void StoreInt8(DType dtype, void* p, int64_t i, int32_t v) {
  if (dtype == DType::kI8) {
    static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
  } else {
    static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace kiln::cpu
