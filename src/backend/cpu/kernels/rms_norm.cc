// RMSNorm entry points: rows split over threads.
#include "backend/cpu/kernels/rms_norm.h"

#include <algorithm>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {
namespace {

void Run(const KernelContext& ctx, RmsNormArgs args, int64_t tokens) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  const int64_t per_token = args.dim * args.heads;
  ParallelRanges(ctx, tokens, std::max<int64_t>(1, 32768 / std::max<int64_t>(per_token, 1)),
                 [&](int64_t begin, int64_t end, int) {
                   RmsNormArgs piece = args;
                   piece.t_begin = begin;
                   piece.t_end = end;
                   kernels.rms_norm(piece);
                 });
}

}  // namespace

void RmsNorm(const KernelContext& ctx, int64_t rows, int64_t dim, const float* x, int64_t ldx,
             const float* weight, float eps, float* y, int64_t ldy) {
  Run(ctx, RmsNormArgs{x, ldx, nullptr, 0, y, ldy, weight, dim, 1, 0, 0, eps}, rows);
}

void RmsNormHeads(const KernelContext& ctx, int64_t tokens, int64_t heads, int64_t head_dim, const float* x,
                  int64_t ldx, const float* weight, float eps, float* y, int64_t ldy) {
  Run(ctx, RmsNormArgs{x, ldx, nullptr, 0, y, ldy, weight, head_dim, heads, 0, 0, eps}, tokens);
}

void AddRmsNorm(const KernelContext& ctx, int64_t rows, int64_t dim, const float* x, int64_t ldx,
                float* residual, int64_t ld_residual, const float* weight, float eps, float* y, int64_t ldy) {
  Run(ctx, RmsNormArgs{x, ldx, residual, ld_residual, y, ldy, weight, dim, 1, 0, 0, eps}, rows);
}

void AddRmsNorm(const KernelContext& ctx, int64_t rows, int64_t dim, const float* x, int64_t ldx,
                const float* residual, int64_t ld_residual, float* sum, int64_t ld_sum, const float* weight,
                float eps, float* y, int64_t ldy) {
  RmsNormArgs args{x, ldx, sum, ld_sum, y, ldy, weight, dim, 1, 0, 0, eps};
  args.residual_in = residual;
  args.ld_residual_in = ld_residual;
  Run(ctx, args, rows);
}

}  // namespace kiln::cpu
