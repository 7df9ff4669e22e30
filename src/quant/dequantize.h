// Reference conversion of every stored element type to float32: the plain
// code that vectorized kernels are tested against.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "quant/ggml_blocks.h"

namespace kiln {

// Converts `n` consecutive elements of type `dtype` at `src` to float32 in
// `dst`. Block types read n / block_size whole blocks. Integer and bool
// types convert by value. Fails (without writing) when n is negative or not
// a whole number of blocks. `src` needs no particular alignment.
Status DequantizeRow(DType dtype, const void* src, float* dst, int64_t n);

// One function per block format. REQUIRES: n is a multiple of the format's
// block size (32 for Q4_0..Q8_1, 256 for the k-quants); src holds n / block
// size blocks, at any alignment.
void DequantizeQ4_0(const void* src, float* dst, int64_t n);
void DequantizeQ4_1(const void* src, float* dst, int64_t n);
void DequantizeQ5_0(const void* src, float* dst, int64_t n);
void DequantizeQ5_1(const void* src, float* dst, int64_t n);
void DequantizeQ8_0(const void* src, float* dst, int64_t n);
void DequantizeQ8_1(const void* src, float* dst, int64_t n);
void DequantizeQ2_K(const void* src, float* dst, int64_t n);
void DequantizeQ3_K(const void* src, float* dst, int64_t n);
void DequantizeQ4_K(const void* src, float* dst, int64_t n);
void DequantizeQ5_K(const void* src, float* dst, int64_t n);
void DequantizeQ6_K(const void* src, float* dst, int64_t n);
void DequantizeQ8_K(const void* src, float* dst, int64_t n);
void DequantizeIQ4_NL(const void* src, float* dst, int64_t n);
void DequantizeIQ4_XS(const void* src, float* dst, int64_t n);
void DequantizeIQ2_XXS(const void* src, float* dst, int64_t n);
void DequantizeIQ2_XS(const void* src, float* dst, int64_t n);
void DequantizeIQ2_S(const void* src, float* dst, int64_t n);
void DequantizeIQ3_XXS(const void* src, float* dst, int64_t n);
void DequantizeIQ3_S(const void* src, float* dst, int64_t n);

// The 6-bit scale and min of sub-block `j` (0..7) of a Q4_K or Q5_K block:
// sub-blocks 0-3 keep theirs in the low 6 bits of bytes j and j + 4; 4-7 keep
// the low 4 bits in byte j + 4 (scale low nibble, min high nibble) and the top
// 2 bits in the spare top bits of bytes j - 4 (scale) and j (min).
void UnpackScaleMinK4(const uint8_t scales[kKScaleBytes], int j, int* scale, int* min);

// The 6-bit scale (0..63, before subtracting 32) of sub-block `i` (0..15) of
// a Q3_K block: low 4 bits from a nibble of bytes 0-7, high 2 bits from a
// 2-bit field of bytes 8-11.
int UnpackScaleQ3_K(const uint8_t scales[kKScaleBytes], int i);

// The 6-bit scale (0..63, before subtracting 32) of sub-block `j` (0..7) of
// an IQ4_XS block.
int UnpackScaleIQ4_XS(const BlockIQ4_XS& block, int j);

}  // namespace kiln
