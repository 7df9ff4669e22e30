// Elementwise arithmetic entry points.
#include "backend/cpu/kernels/elementwise.h"

#include "backend/cpu/kernels/elementwise_dispatch.h"

namespace kiln::cpu {

void Add(const KernelContext& ctx, int64_t rows, int64_t cols, const float* a, int64_t lda, const float* b,
         int64_t ldb, float* out, int64_t ld_out) {
  RunElementwise(ctx, KernelsFor(ctx.isa).add, {a, lda, b, ldb, out, ld_out, rows, cols, 0.0f});
}

void Mul(const KernelContext& ctx, int64_t rows, int64_t cols, const float* a, int64_t lda, const float* b,
         int64_t ldb, float* out, int64_t ld_out) {
  RunElementwise(ctx, KernelsFor(ctx.isa).mul, {a, lda, b, ldb, out, ld_out, rows, cols, 0.0f});
}

void Scale(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float s,
           float* out, int64_t ld_out) {
  RunElementwise(ctx, KernelsFor(ctx.isa).scale, {x, ldx, nullptr, 0, out, ld_out, rows, cols, s});
}

}  // namespace kiln::cpu
