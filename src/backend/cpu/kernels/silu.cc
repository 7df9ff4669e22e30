// SiLU over rows.
#include "backend/cpu/kernels/silu.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {
namespace {

void SiluRow(int64_t cols, const float* x, float* out) {
  for (int64_t i = 0; i < cols; ++i) out[i] = x[i] / (1.0f + std::exp(-x[i]));
}

}  // namespace

void Silu(const KernelContext& ctx, int64_t rows, int64_t cols, const float* x, int64_t ldx, float* out,
          int64_t ld_out) {
  const int64_t min_rows = std::max<int64_t>(1, kMinElementwisePerThread / std::max<int64_t>(cols, 1));
  ParallelRanges(ctx, rows, min_rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) SiluRow(cols, x + r * ldx, out + r * ld_out);
  });
}

namespace ref {

void Silu(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* out, int64_t ld_out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[r * ldx + c];
      out[r * ld_out + c] = v / (1.0f + std::exp(-v));
    }
  }
}

}  // namespace ref
}  // namespace kiln::cpu
