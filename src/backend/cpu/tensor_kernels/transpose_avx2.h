// The transposing tile copy of strided_copy.cc for 4-byte elements, with
// 8x8 blocks transposed in AVX2 registers. Call only where
// GetCpuInfo().avx2 holds.
#pragma once

#include <cstdint>

namespace kiln::cpu::shape_kernels {

// dst[r * dst_row_stride + c] = src[r + c * src_col_stride] for r < rows,
// c < cols; elements of 4 bytes, strides in elements.
void CopyTransposed4Avx2(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t dst_row_stride,
                         int64_t src_col_stride);

}  // namespace kiln::cpu::shape_kernels
