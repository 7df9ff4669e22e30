// The AVX2 table of the tensor ops' vector kernels (tensor_vec.h); compiled
// with -mavx2 -mfma -mf16c, called only when the CPU has them.
#include "backend/cpu/tensor_kernels/tensor_vec.h"

#if defined(__x86_64__)
#include "backend/cpu/kernels/simd_avx2.h"
#include "backend/cpu/tensor_kernels/tensor_vec_simd.h"
#endif

namespace kiln::cpu::avx2 {

const TensorVecTable& TensorVecTableAvx2() {
#if defined(__x86_64__)
  static constexpr TensorVecTable kTable = MakeTensorVecTable<SimdAvx2>(Isa::kAvx2);
  return kTable;
#else
  return ref::TensorVecTableRef();  // never selected off x86
#endif
}

}  // namespace kiln::cpu::avx2
