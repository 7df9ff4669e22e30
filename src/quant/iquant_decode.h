// The 2- and 3-bit i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) as
// integers: every block is `unit` times, per piece of 16 values, an odd
// scale times signed grid magnitudes. Dequantization and the quantized kernels'
// reference both read blocks through this, so they agree by construction.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "quant/ggml_blocks.h"

namespace kiln {

// value i = (unit * scale[i / 16]) * w[i], which is ggml's float value
// exactly. unit is d / 8 (IQ2), d / 4 (IQ3_XXS) or d (IQ3_S); scale is
// 2 ls + 1 (1..31), the same for both pieces of a sub-block of 32 except in
// IQ2_XS and IQ2_S; |w| <= 62.
struct IQuantBlock {
  float unit = 0.0f;
  int8_t scale[kQK_K / 16] = {};
  int8_t w[kQK_K] = {};
};

// Whether `dtype` is one of the grid i-quants above.
bool IsGridIQuant(DType dtype);

// Decodes one block of `dtype` (REQUIRES: IsGridIQuant) at `block`.
void DecodeIQuantBlock(DType dtype, const uint8_t* block, IQuantBlock* out);

}  // namespace kiln
