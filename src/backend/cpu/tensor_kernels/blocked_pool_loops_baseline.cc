// The nchw16c pool loops built for the baseline ISA (SSE2).
#include "backend/cpu/tensor_kernels/blocked_pool_body.h"

namespace kiln::cpu {

void BlockedPoolRowsBaseline(const BlockedPoolJob& job, int64_t begin, int64_t end) {
  PoolRows(job, begin, end);
}

void BlockedMaxPoolSeparableBaseline(const BlockedPoolJob& job, float* rows, int64_t begin, int64_t end) {
  MaxPoolPlanesSeparable(job, rows, begin, end);
}

void BlockedGlobalPoolBaseline(const BlockedGlobalPoolJob& job, int64_t begin, int64_t end) {
  GlobalPool(job, begin, end);
}

}  // namespace kiln::cpu
