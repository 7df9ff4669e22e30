// The AVX2 kernel table: the generic vector kernels instantiated with 8-lane
// vectors. Compiled with -mavx2 -mfma -mf16c; only called when the CPU has them.
#include "backend/cpu/kernels/kernel_table.h"

#if defined(__x86_64__)
#include "backend/cpu/kernels/attention_keys_in_lanes.h"
#include "backend/cpu/kernels/elementwise_simd.h"
#include "backend/cpu/kernels/linear_simd.h"
#include "backend/cpu/kernels/matmul_simd.h"
#include "backend/cpu/kernels/norm_simd.h"
#include "backend/cpu/kernels/rope_simd.h"
#include "backend/cpu/kernels/simd_avx2.h"
#include "backend/cpu/kernels/softmax_simd.h"
#endif

namespace kiln::cpu::avx2 {

#if defined(__x86_64__)
const KernelTable& Table() {
  using S = SimdAvx2;
  static constexpr KernelTable kTable = {
      .isa = Isa::kAvx2,
      .linear = &VecLinear<S>,
      .rms_norm = &VecRmsNorm<S>,
      .rope = &VecRope<S>,
      .add = &VecAdd<S>,
      .mul = &VecMul<S>,
      .scale = &VecScale<S>,
      .silu_mul = &VecSiluMul<S>,
      .gelu = &VecGeluElementwise<S>,
      .gelu_tanh = &VecGeluTanhElementwise<S>,
      .gelu_mul = &VecGeluMul<S>,
      .gelu_tanh_mul = &VecGeluTanhMul<S>,
      .f32_to_bf16 = &VecF32ToBf16<S>,
      .bf16_to_f32 = &VecBf16ToF32<S>,
      .f32_to_f16 = &VecF32ToF16<S>,
      .f16_to_f32 = &VecF16ToF32<S>,
      .softmax = &VecSoftmax<S>,
      .matmul = &VecMatMul<S>,
      .attention = &VecAttention<S>,
      .exp = &VecExpArray<S>,
      .tanh = &VecTanhArray<S>,
      .erf = &VecErfArray<S>,
  };
  return kTable;
}
#else
const KernelTable& Table() {
  return ref::Table();
}  // never selected off x86
#endif

}  // namespace kiln::cpu::avx2
