// Elementwise arithmetic on strided fp32 matrices.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// out = a + b over rows x cols. out may equal a or b.
void Add(const KernelContext& ctx, int64_t rows, int64_t cols, const float* a, int64_t lda, const float* b,
         int64_t ldb, float* out, int64_t ld_out);

// out = a * b over rows x cols. out may equal a or b.
void Mul(const KernelContext& ctx, int64_t rows, int64_t cols, const float* a, int64_t lda, const float* b,
         int64_t ldb, float* out, int64_t ld_out);

// out = x * s over rows x cols. out may equal x.
void Scale(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float s,
           float* out, int64_t ld_out);

}  // namespace kiln::cpu
