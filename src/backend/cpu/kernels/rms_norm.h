// RMSNorm, per row or per attention head, and fused with the residual add.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// y[r] = weight * x[r] / sqrt(mean(x[r]^2) + eps) for rows r < rows of dim
// floats (ldx / ldy apart), accumulated in fp32 in a fixed order that
// depends only on dim. y may equal x.
void RmsNorm(const KernelContext& ctx, int64_t rows, int64_t dim, const float* x, int64_t ldx,
             const float* weight, float eps, float* y, int64_t ldy);

// The same per attention head (Qwen3's q/k norm): token t's head h is the
// head_dim floats at x + t * ldx + h * head_dim, normalized with the one
// weight vector of head_dim. y may equal x.
void RmsNormHeads(const KernelContext& ctx, int64_t tokens, int64_t heads, int64_t head_dim, const float* x,
                  int64_t ldx, const float* weight, float eps, float* y, int64_t ldy);

// residual[r] += x[r]; y[r] = rmsnorm(residual[r]): the pre-norm block's
// residual add fused with the next norm. Both outputs are written.
// y may equal x; residual must not overlap x or y.
void AddRmsNorm(const KernelContext& ctx, int64_t rows, int64_t dim, const float* x, int64_t ldx,
                float* residual, int64_t ld_residual, const float* weight, float eps, float* y, int64_t ldy);

// The same with the residual read from one buffer and the sum written to
// another: sum[r] = residual[r] + x[r]; y[r] = rmsnorm(sum[r]). Each row is
// read and written by the thread that normalizes it (a copy of the
// residual into sum beforehand ran on one thread, and the other then read
// its rows from that thread's cache). sum may equal residual; sum must not
// overlap x or y otherwise.
void AddRmsNorm(const KernelContext& ctx, int64_t rows, int64_t dim, const float* x, int64_t ldx,
                const float* residual, int64_t ld_residual, float* sum, int64_t ld_sum, const float* weight,
                float eps, float* y, int64_t ldy);

}  // namespace kiln::cpu
