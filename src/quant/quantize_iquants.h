// Reference quantizers for the non-linear 4-bit formats IQ4_NL and IQ4_XS:
// each group of 32 values gets the indices into kIQ4Values and the scale
// that fit it best by weighted least squares over a range of candidate
// scales, without an importance matrix (the weights are the values' own
// magnitudes).
#pragma once

#include <cstdint>

namespace kiln {

// IQ4_NL: per block of 32, value ≈ d * kIQ4Values[q]. REQUIRES: n % 32 == 0;
// dst holds n / 32 blocks; src finite.
void QuantizeIQ4_NLRef(const float* src, void* dst, int64_t n);

// IQ4_XS: per super-block of 256, each sub-block of 32 fitted as in IQ4_NL,
// then its scale rounded to a 6-bit multiple (-32..31) of one fp16 scale
// and the sub-block's indices chosen again for that rounded scale.
// REQUIRES: n % 256 == 0; dst holds n / 256 blocks; src finite.
void QuantizeIQ4_XSRef(const float* src, void* dst, int64_t n);

}  // namespace kiln
