// Simple reference quantizers (round to nearest, one scale per block) for the
// formats kiln generates itself: dummy weights and tests.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

// Q8_0: per block of 32, d = max|x| / 127 and q = round(x / d).
// REQUIRES: n % 32 == 0; dst holds n / 32 blocks.
void QuantizeQ8_0Ref(const float* src, void* dst, int64_t n);

// Q4_0: per block of 32, d = -m / 8 where m is the value of largest
// magnitude (keeping its sign, so that it maps exactly to q = 0), and
// q = clamp(round(x / d) + 8, 0, 15). REQUIRES: n % 32 == 0.
void QuantizeQ4_0Ref(const float* src, void* dst, int64_t n);

// Converts `n` floats to `dtype` (f32, f16, bf16, q8_0 or q4_0) at `dst`,
// which must hold DTypeBytes(dtype, n) bytes. Fails for other dtypes and for
// n that is not a whole number of blocks.
Status QuantizeRowRef(DType dtype, const float* src, void* dst, int64_t n);

}  // namespace kiln
