// The nchw16c pool loops built for avx2.
#include "backend/cpu/tensor_kernels/blocked_pool_body.h"

namespace kiln::cpu {

void BlockedPoolRowsAvx2(const BlockedPoolJob& job, int64_t begin, int64_t end) {
  PoolRows(job, begin, end);
}

void BlockedMaxPoolSeparableAvx2(const BlockedPoolJob& job, float* rows, int64_t begin, int64_t end) {
  MaxPoolPlanesSeparable(job, rows, begin, end);
}

void BlockedGlobalPoolAvx2(const BlockedGlobalPoolJob& job, int64_t begin, int64_t end) {
  GlobalPool(job, begin, end);
}

}  // namespace kiln::cpu
