// Scalar conversions between float and the 16- and 8-bit float formats.
// Vector kernels convert in bulk with intrinsics; these are the reference.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16 is the top half of a float32.
inline float Bf16ToF32(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t F32ToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16.
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);  // round to nearest even, overflow to inf

// OCP 8-bit floats (as safetensors' F8_E4M3 = float8_e4m3fn and F8_E5M2).
float F8E4M3ToF32(uint8_t v);
float F8E5M2ToF32(uint8_t v);

}  // namespace kiln
