// The AVX-512 quantized kernels: the integer GEMM with vpdpbusd where the CPU
// has AVX512-VNNI (maddubs/madd otherwise), and the int8-cache attention with
// 16-lane float vectors. Compiled with -mavx512f/bw/vl/vnni...; only called
// when the CPU has AVX-512 (F, BW, VL), and the VNNI variant only with VNNI.
#include "backend/cpu/qkernels/qkernel_table.h"

// GCC 12's AVX-512 intrinsic headers build some vectors from deliberately
// undefined ones and then warn about them (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__x86_64__)
#include "backend/cpu/kernels/attention_simd.h"
#include "backend/cpu/kernels/simd_avx512.h"
#include "backend/cpu/qkernels/quant_gemm_simd.h"
#include "core/cpu_info.h"
#endif

namespace kiln::cpu::qavx512 {

#if defined(__x86_64__)
namespace {

void AttentionI8(const AttentionI8Args& a) {
  const AttentionArgs& b = a.base;
  float* weights = b.scratch + AttentionScratchFloats(b.h_end - b.h_begin, b.block_size, b.head_dim);
  VecAttentionI8<SimdAvx512>(b, a.k_scales, a.v_scales, weights);
}

QuantKernelTable MakeTable() {
  const bool vnni = GetCpuInfo().avx512_vnni;
  QuantKernelTable t = {
      .isa = Isa::kAvx512,
      .name = vnni ? "avx512-vnni" : "avx512",
      .quantize_rows = &qgemm::QuantizeRows,
      .gemm = vnni ? &qgemm::GemmAny<qgemm::DotVnni> : &qgemm::GemmAny<qgemm::DotAvx2>,
      .kv_quantize = qref::Table().kv_quantize,
      .attention_i8 = &AttentionI8,
  };
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

}  // namespace kiln::cpu::qavx512
