// The nchw16c pool loops built for avx512.
#include "backend/cpu/tensor_kernels/blocked_pool_body.h"

namespace kiln::cpu {

void BlockedPoolRowsAvx512(const BlockedPoolJob& job, int64_t begin, int64_t end) {
  PoolRows(job, begin, end);
}

void BlockedMaxPoolSeparableAvx512(const BlockedPoolJob& job, float* rows, int64_t begin, int64_t end) {
  MaxPoolPlanesSeparable(job, rows, begin, end);
}

void BlockedGlobalPoolAvx512(const BlockedGlobalPoolJob& job, int64_t begin, int64_t end) {
  GlobalPool(job, begin, end);
}

}  // namespace kiln::cpu
