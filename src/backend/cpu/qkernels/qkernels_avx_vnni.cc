// The quantized GEMM with VEX-encoded vpdpbusd on 256 bits (AVX-VNNI: CPUs
// with VNNI but without AVX-512, or with it under KILN_ISA=avx-vnni), the
// AVX2 table's other kernels beside it. Compiled with -mavx2 -mfma -mf16c
// -mavxvnni; only called when the CPU has AVX2 and AVX-VNNI.
#include "backend/cpu/qkernels/qkernel_table.h"

// GCC 12 at -O1 (the sanitizer build) warns about intrinsics' deliberately
// undefined vectors (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__x86_64__)
#include "backend/cpu/qkernels/quant_gemm_simd.h"
#endif

namespace kiln::cpu::qavxvnni {

#if defined(__x86_64__)
namespace {

QuantKernelTable MakeTable() {
  QuantKernelTable t = qavx2::Table();
  t.name = "avx-vnni";
  t.gemm = &qgemm::GemmAny<qgemm::DotVnni>;
  return t;
}

}  // namespace

const QuantKernelTable& Table() {
  static const QuantKernelTable kTable = MakeTable();
  return kTable;
}
#else
const QuantKernelTable& Table() { return qref::Table(); }  // never selected off x86
#endif

}  // namespace kiln::cpu::qavxvnni
