// The SiLU activation on its own, y = x / (1 + e^-x), with libm's expf: the
// op of a graph that applies silu without a gating product (SwiGLU's
// fused silu(gate) * up is SiluMul in activation.h, with the vector exp).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// out[r, c] = x[r, c] / (1 + expf(-x[r, c])) in fp32, over rows x cols
// (rows ldx and ld_out elements apart), rows split over ctx's threads; the
// same bits as ref::Silu whatever the split. out may equal x.
void Silu(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float* out,
          int64_t ld_out);

namespace ref {
// The plain loop, on the caller's thread.
void Silu(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* out, int64_t ld_out);
}  // namespace ref

}  // namespace kiln::cpu
