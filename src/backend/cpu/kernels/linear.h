// The linear layer y = x W^T + bias on packed weights: the GEMV of decoding
// and the GEMM of prefill.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"
#include "backend/cpu/kernels/packed_weight.h"

namespace kiln::cpu {

// y[m, n] = sum over k of x[m, k] * W[n, k], plus bias[n] if bias is set,
// for m < rows and n < w.rows(); K = w.cols(). Rows of x are ldx floats
// apart and rows of y ldy apart, so y may be a column slice of a wider
// buffer (a fused projection's output read in place).
//
// Deterministic: each y[m, n] is one fp32 FMA chain over k in increasing
// order, then + bias[n], whatever `rows`, the ISA's tiling or the threads;
// a row's result does not depend on the batch it is computed in.
// REQUIRES: ldx >= K, ldy >= N, y does not overlap x or bias.
void Linear(const KernelContext& ctx, int64_t rows, const float* x, int64_t ldx, const PackedWeight& w,
            const float* bias, float* y, int64_t ldy);

// As Linear, with x in bfloat16 (converted exactly to fp32 first).
void LinearBf16Input(const KernelContext& ctx, int64_t rows, const uint16_t* x, int64_t ldx,
                     const PackedWeight& w, const float* bias, float* y, int64_t ldy);

}  // namespace kiln::cpu
