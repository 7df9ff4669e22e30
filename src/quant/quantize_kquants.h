// Reference quantizers for the k-quant formats Q4_K, Q5_K and Q6_K: for each
// super-block of 256 values, a search for the sub-block scales (and mins)
// that minimize the weighted squared error, then the scales themselves
// quantized to 6 or 8 bits under one fp16 super-scale, as ggml's reference
// quantizers do (so that files agree with llama.cpp's byte for byte on most
// blocks).
#pragma once

#include <cstdint>

namespace kiln {

// REQUIRES for all three: n % 256 == 0; dst holds n / 256 blocks; src finite.

// Q4_K: 8 sub-blocks of 32, value ≈ d * sc * q - dmin * m with q in 0..15.
// Each sub-block's scale and min come from a weighted least-squares fit
// (weights sqrt(mean(x^2)) + |x|) over 21 candidate grids.
void QuantizeQ4_KRef(const float* src, void* dst, int64_t n);

// Q5_K: as Q4_K with q in 0..31 and 16 candidate grids.
void QuantizeQ5_KRef(const float* src, void* dst, int64_t n);

// Q6_K: 16 sub-blocks of 16, value ≈ d * sc * (q - 32) with q in 0..63 and
// a signed 8-bit sc; each sub-block's scale maximizes the x^2-weighted fit
// over 19 candidate grids.
void QuantizeQ6_KRef(const float* src, void* dst, int64_t n);

}  // namespace kiln
