// Soft-capping, y = cap * tanh(scale * x / cap): Gemma 2 bounds its
// attention scores (cap 50) and its logits (cap 30) so, smoothly.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// out[r, c] = cap * tanhf(scale * x[r, c] / cap) in fp32 (libm's tanh, as the
// paged attention's reference kernel), over rows x cols (rows ldx and
// ld_out elements apart), rows split over ctx's threads. out may equal x.
// REQUIRES: cap > 0.
void SoftCap(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale,
             float cap, float* out, int64_t ld_out);

}  // namespace kiln::cpu
