// kiln's 2-d convolution with 16-lane vectors: 6 channels x 64 pixels per
// register tile. Compiled with AVX-512 flags; called only when the CPU has them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "backend/cpu/tensor_kernels/conv2d_plan.h"

#if defined(__x86_64__)
#include "backend/cpu/kernels/simd_avx512.h"
#include "backend/cpu/tensor_kernels/conv2d_simd.h"
#endif

namespace kiln::cpu::avx512 {

void RunConvPlan(const ConvPlan& plan, const float* x, const float* residual, float* y, float* scratch,
                 ThreadPool* pool) {
#if defined(__x86_64__)
  RunConvPlanWith<SimdAvx512, kAvx512Mr, kAvx512Nv>(plan, x, residual, y, scratch, pool);
#else
  (void)plan, (void)x, (void)residual, (void)y, (void)scratch, (void)pool;
#endif
}

}  // namespace kiln::cpu::avx512
