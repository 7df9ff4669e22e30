// The bytes every transfer carries: a pattern that differs per message (by
// seed) and per offset, so that a receiver can tell a complete, correct
// copy from a short, stale or shifted one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::transport {

inline uint8_t PatternByte(uint64_t seed, size_t i) {
  const uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xC2B2AE3D27D4EB4Full;
  return static_cast<uint8_t>(x >> 56);
}

inline void FillPattern(uint8_t* data, size_t bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes; ++i) data[i] = PatternByte(seed, i);
}

inline bool HasPattern(const uint8_t* data, size_t bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes; ++i) {
    if (data[i] != PatternByte(seed, i)) return false;
  }
  return true;
}

}  // namespace kiln::transport
