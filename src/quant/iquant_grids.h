// The fixed lookup tables of ggml's 2- and 3-bit i-quants (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S): part of the file format, the same in every
// reader. A grid entry packs the magnitudes of 8 (IQ2) or 4 (IQ3) weights,
// one per byte, first weight in the lowest byte; signs are stored apart.
#pragma once

#include <cstdint>

namespace kiln {

extern const uint64_t kIQ2XXSGrid[256];  // magnitudes 8, 25, 43
extern const uint64_t kIQ2XSGrid[512];
extern const uint64_t kIQ2SGrid[1024];
extern const uint32_t kIQ3XXSGrid[256];  // magnitudes 4, 12, ..., 52, 62
extern const uint32_t kIQ3SGrid[512];    // magnitudes 1, 3, ..., 15

// Byte j (0..7 or 0..3) of a grid entry: weight j's magnitude.
inline int GridByte(uint64_t entry, int j) { return static_cast<int>((entry >> (8 * j)) & 0xFF); }

// The 8 signs of a group of 8 weights stored in 7 bits (IQ2_XXS, IQ2_XS,
// IQ3_XXS): the eighth sign makes the count of minus signs even. Bit j set:
// weight j is negative.
inline uint8_t SignsFrom7Bits(uint32_t seven) {
  const uint32_t s = seven & 0x7F;
  return static_cast<uint8_t>(s | ((__builtin_popcount(s) & 1u) << 7));
}

}  // namespace kiln
