// kiln's 2-d convolution with 8-lane vectors: 6 channels x 16 pixels per
// register tile, on the direct path where the plan chose it
// (conv2d_direct_simd.h). Compiled with AVX2 + FMA flags; called only when
// the CPU has them.
#include "backend/cpu/tensor_kernels/conv2d_plan.h"

#if defined(__x86_64__)
#include "backend/cpu/kernels/simd_avx2.h"
#include "backend/cpu/tensor_kernels/conv2d_direct_simd.h"
#include "backend/cpu/tensor_kernels/conv2d_simd.h"
#endif

namespace kiln::cpu::avx2 {

void RunConvPlan(const ConvPlan& plan, const float* x, const float* residual, float* y, float* scratch,
                 ThreadPool* pool) {
#if defined(__x86_64__)
  if (plan.path == ConvPath::kDirect) {
    RunConvDirect<SimdAvx2, kAvx2DirectMr, kAvx2DirectNv>(plan, x, residual, y, scratch, pool);
  } else {
    RunConvPlanWith<SimdAvx2, 6, 2>(plan, x, residual, y, scratch, pool);
  }
#else
  (void)plan, (void)x, (void)residual, (void)y, (void)scratch, (void)pool;
#endif
}

}  // namespace kiln::cpu::avx2
