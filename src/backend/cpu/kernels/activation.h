// The feed-forward activations: SwiGLU's silu(gate) * up and GELU in its
// erf and tanh forms, alone or gating.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

enum class GeluForm { kErf, kTanh };

// out = silu(gate) * up = gate / (1 + e^-gate) * up, elementwise over rows x
// cols. gate and up may be the two halves of one fused row (up = gate + cols,
// both with ld = 2 cols). out may equal gate.
void SiluMul(const KernelContext& ctx, int64_t rows, int64_t cols, const float* gate, int64_t ld_gate,
             const float* up, int64_t ld_up, float* out, int64_t ld_out);

// SiluMul on the calling thread only (the same bits), for work that is
// already one thread's share of a parallel loop.
void SiluMulOnThisThread(Isa isa, int64_t rows, int64_t cols, const float* gate, int64_t ld_gate,
                         const float* up, int64_t ld_up, float* out, int64_t ld_out);

// out = gelu(x): x/2 (1 + erf(x / sqrt 2)), or the tanh approximation
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out may equal x.
void Gelu(const KernelContext& ctx, GeluForm form, int64_t rows, int64_t cols, const float* x, int64_t ldx,
          float* out, int64_t ld_out);

// out = gelu(gate) * up (GeGLU). out may equal gate.
void GeluMul(const KernelContext& ctx, GeluForm form, int64_t rows, int64_t cols, const float* gate,
             int64_t ld_gate, const float* up, int64_t ld_up, float* out, int64_t ld_out);

}  // namespace kiln::cpu
