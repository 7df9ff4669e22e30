// One scalar in a tensor's element encoding, and filling a buffer with it
// (Pad's and ConstantOfShape's fill values, OneHot's and EyeLike's ones).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace kiln::cpu::shape_kernels {

// Writes `value` converted to `dtype` (rounded to nearest for f16/bf16,
// truncated for integers, nonzero for bool) into out (ElementBytes bytes).
void EncodeScalar(DType dtype, double value, uint8_t* out);

// n copies of the elem_bytes-long `value`.
void FillElements(uint8_t* dst, const uint8_t* value, size_t elem_bytes, int64_t n);

}  // namespace kiln::cpu::shape_kernels
