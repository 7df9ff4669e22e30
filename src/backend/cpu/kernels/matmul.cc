// Batched matmul: (batch, row) pairs split over threads.
#include "backend/cpu/kernels/matmul.h"

#include <algorithm>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {

void MatMul(const KernelContext& ctx, int64_t batch, int64_t m, int64_t n, int64_t k, ConstMatrixBatch a,
            ConstMatrixBatch b, bool transpose_b, MatrixBatch c, int64_t b_group) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  const KernelTable& kernels = KernelsFor(ctx.isa);
  b_group = std::max<int64_t>(b_group, 1);
  const int64_t row_cost = std::max<int64_t>(1, n * k);
  ParallelRanges(ctx, batch * m, std::max<int64_t>(1, 65536 / row_cost),
                 [&](int64_t begin, int64_t end, int) {
                   // Runs of rows within one batch item go to the kernel together.
                   for (int64_t row = begin; row < end;) {
                     const int64_t i = row / m;
                     const int64_t m_end = std::min(end - i * m, m);
                     MatMulArgs args{a.data + i * a.batch_stride,
                                     a.ld,
                                     b.data + (i / b_group) * b.batch_stride,
                                     b.ld,
                                     transpose_b,
                                     c.data + i * c.batch_stride,
                                     c.ld,
                                     row - i * m,
                                     m_end,
                                     n,
                                     k};
                     kernels.matmul(args);
                     row = i * m + m_end;
                   }
                 });
}

}  // namespace kiln::cpu
