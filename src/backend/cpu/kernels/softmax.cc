// Softmax entry points: rows split over threads.
#include "backend/cpu/kernels/softmax.h"

#include <algorithm>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {

void MaskedSoftmax(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx,
                   float scale, const int32_t* valid_begin, const int32_t* valid_end, float* out,
                   int64_t ld_out) {
  if (cols <= 0) return;
  const KernelTable& kernels = KernelsFor(ctx.isa);
  ParallelRanges(ctx, rows, std::max<int64_t>(1, 8192 / cols), [&](int64_t begin, int64_t end, int) {
    SoftmaxArgs args{x + begin * ldx,
                     ldx,
                     out + begin * ld_out,
                     ld_out,
                     end - begin,
                     cols,
                     scale,
                     valid_begin != nullptr ? valid_begin + begin : nullptr,
                     valid_end != nullptr ? valid_end + begin : nullptr};
    kernels.softmax(args);
  });
}

void Softmax(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale,
             float* out, int64_t ld_out) {
  MaskedSoftmax(ctx, rows, cols, x, ldx, scale, nullptr, nullptr, out, ld_out);
}

}  // namespace kiln::cpu
