// Reading the quantized ops' scales and zero points (per tensor or per
// axis, any of the dtypes ONNX allows) and ONNX's rounding to an 8-bit
// value: half to even, then saturation.
#pragma once

#include <cmath>
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

// round-half-to-even(v) + zero_point, saturated to dtype (u8 or i8); NaN
// gives the zero point.
inline int32_t SaturateRound(float v, int32_t zero_point, DType dtype) {
  const int32_t lo = dtype == DType::kI8 ? -128 : 0, hi = dtype == DType::kI8 ? 127 : 255;
  if (std::isnan(v)) return zero_point < lo ? lo : zero_point > hi ? hi : zero_point;
  const float r = std::nearbyint(v) + static_cast<float>(zero_point);
  return r < static_cast<float>(lo) ? lo : r > static_cast<float>(hi) ? hi : static_cast<int32_t>(r);
}

inline void StoreInt8(DType dtype, void* p, int64_t i, int32_t v) {
  if (dtype == DType::kI8) {
    static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
  } else {
    static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace kiln::cpu
