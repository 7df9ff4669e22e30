// Row conversions between fp32 and the 16-bit float formats.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"
#include "core/dtype.h"
#include "core/status.h"

namespace kiln::cpu {

// Converts rows x cols elements from src (rows lds elements apart) to dst
// (ldd apart): f32 to bf16 or f16 rounds to nearest even (NaN stays NaN),
// bf16 or f16 to f32 is exact, equal types copy. Fails on other dtypes.
// REQUIRES: src and dst do not overlap.
Status ConvertRows(const KernelContext& ctx, int64_t rows, int64_t cols, DType src_type, const void* src,
                   int64_t lds, DType dst_type, void* dst, int64_t ldd);

}  // namespace kiln::cpu
