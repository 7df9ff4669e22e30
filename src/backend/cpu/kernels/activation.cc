// Activation entry points.
#include "backend/cpu/kernels/activation.h"

#include "backend/cpu/kernels/elementwise_dispatch.h"

namespace kiln::cpu {
namespace {

// Rough cost of one activation relative to an add, for the threading grain.
constexpr int64_t kActivationCost = 8;

}  // namespace

void SiluMul(const KernelContext& ctx, int64_t rows, int64_t cols, const float* gate, int64_t ld_gate,
             const float* up, int64_t ld_up, float* out, int64_t ld_out) {
  RunElementwise(ctx, KernelsFor(ctx.isa).silu_mul, {gate, ld_gate, up, ld_up, out, ld_out, rows, cols, 0.0f},
                 kActivationCost);
}

void SiluMulOnThisThread(Isa isa, int64_t rows, int64_t cols, const float* gate, int64_t ld_gate,
                         const float* up, int64_t ld_up, float* out, int64_t ld_out) {
  if (rows <= 0 || cols <= 0) return;
  KernelsFor(isa).silu_mul({gate, ld_gate, up, ld_up, out, ld_out, rows, cols, 0.0f});
}

void Gelu(const KernelContext& ctx, GeluForm form, int64_t rows, int64_t cols, const float* x, int64_t ldx,
          float* out, int64_t ld_out) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  RunElementwise(ctx, form == GeluForm::kErf ? kernels.gelu : kernels.gelu_tanh,
                 {x, ldx, nullptr, 0, out, ld_out, rows, cols, 0.0f}, kActivationCost);
}

void GeluMul(const KernelContext& ctx, GeluForm form, int64_t rows, int64_t cols, const float* gate,
             int64_t ld_gate, const float* up, int64_t ld_up, float* out, int64_t ld_out) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  RunElementwise(ctx, form == GeluForm::kErf ? kernels.gelu_mul : kernels.gelu_tanh_mul,
                 {gate, ld_gate, up, ld_up, out, ld_out, rows, cols, 0.0f}, kActivationCost);
}

}  // namespace kiln::cpu
