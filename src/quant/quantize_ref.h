// Reference quantizers for every format kiln writes: round to nearest with one
// scale (and min) per block for the 32-element formats, as ggml's reference
// does, and the float conversions; QuantizeRowRef dispatches to the k-quants
// of quantize_kquants.h and the IQ4 formats of quantize_iquants.h too.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

// Q8_0: per block of 32, d = max|x| / 127 and q = round(x / d), halves away
// from zero. REQUIRES: n % 32 == 0; dst holds n / 32 blocks.
void QuantizeQ8_0Ref(const float* src, void* dst, int64_t n);

// Q4_0: per block of 32, d = -m / 8 where m is the value of largest
// magnitude (keeping its sign, so that it maps exactly to q = 0), and
// q = min(15, floor(x / d + 8.5)). REQUIRES: n % 32 == 0.
void QuantizeQ4_0Ref(const float* src, void* dst, int64_t n);

// Q4_1: per block of 32, m = min(x), d = (max(x) - m) / 15 and
// q = min(15, floor((x - m) / d + 0.5)). REQUIRES: n % 32 == 0.
void QuantizeQ4_1Ref(const float* src, void* dst, int64_t n);

// Q5_0: as Q4_0 with 5-bit q: d = -m / 16, q = min(31, floor(x / d + 16.5)).
// REQUIRES: n % 32 == 0.
void QuantizeQ5_0Ref(const float* src, void* dst, int64_t n);

// Q5_1: as Q4_1 with 5-bit q: d = (max - min) / 31. REQUIRES: n % 32 == 0.
void QuantizeQ5_1Ref(const float* src, void* dst, int64_t n);

// Whether QuantizeRowRef writes `dtype`: f32, f16, bf16, q8_0, q4_0, q4_1,
// q5_0, q5_1, q4_k, q5_k, q6_k, iq4_nl and iq4_xs.
bool CanQuantizeTo(DType dtype);

// Converts `n` floats to `dtype` at `dst`, which must hold DTypeBytes(dtype,
// n) bytes. Fails for dtypes CanQuantizeTo rejects and for n that is not a
// whole number of blocks. The inputs must be finite for the block formats
// (callers check; non-finite values give meaningless but bounded blocks).
Status QuantizeRowRef(DType dtype, const float* src, void* dst, int64_t n);

}  // namespace kiln
