// Soft-capping over rows.
#include "backend/cpu/kernels/softcap.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {

void SoftCap(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float scale,
             float cap, float* out, int64_t ld_out) {
  const int64_t min_rows = std::max<int64_t>(1, kMinElementwisePerThread / std::max<int64_t>(cols, 1));
  ParallelRanges(ctx, rows, min_rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * ldx;
      float* o = out + r * ld_out;
      for (int64_t c = 0; c < cols; ++c) o[c] = cap * std::tanh(scale * in[c] / cap);
    }
  });
}

}  // namespace kiln::cpu
