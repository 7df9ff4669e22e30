// The AVX-512 table of the tensor ops' vector kernels (tensor_vec.h); compiled
// with -mavx512f and relatives, called only when the CPU has them.
#include "backend/cpu/tensor_kernels/tensor_vec.h"

// GCC 12's AVX-512 intrinsic headers build some vectors from deliberately
// undefined ones and then warn about them (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__x86_64__)
#include "backend/cpu/kernels/simd_avx512.h"
#include "backend/cpu/tensor_kernels/tensor_vec_simd.h"
#endif

namespace kiln::cpu::avx512 {

const TensorVecTable& TensorVecTableAvx512() {
#if defined(__x86_64__)
  static constexpr TensorVecTable kTable = MakeTensorVecTable<SimdAvx512>(Isa::kAvx512);
  return kTable;
#else
  return ref::TensorVecTableRef();  // never selected off x86
#endif
}

}  // namespace kiln::cpu::avx512
