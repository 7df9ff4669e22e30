// The AVX2 quantized kernels: the integer GEMM with maddubs/madd, and the
// int8-cache attention with 8-lane float vectors. Compiled with -mavx2
// -mfma -mf16c; only called when the CPU has them.
#include "backend/cpu/qkernels/qkernel_table.h"

#if defined(__x86_64__)
#include "backend/cpu/kernels/attention_simd.h"
#include "backend/cpu/kernels/simd_avx2.h"
#include "backend/cpu/qkernels/quant_gemm_simd.h"
#endif

namespace kiln::cpu::qavx2 {

#if defined(__x86_64__)
namespace {

void AttentionI8(const AttentionI8Args& a) {
  const AttentionArgs& b = a.base;
  float* weights = b.scratch + AttentionScratchFloats(b.h_end - b.h_begin, b.block_size, b.head_dim);
  VecAttentionI8<SimdAvx2>(b, a.k_scales, a.v_scales, weights);
}

}  // namespace

const QuantKernelTable& Table() {
  static const QuantKernelTable kTable = {
      .isa = Isa::kAvx2,
      .name = "avx2",
      .quantize_rows = &qgemm::QuantizeRows,
      .gemm = &qgemm::GemmAny<qgemm::DotAvx2>,
      .kv_quantize = qref::Table().kv_quantize,
      .attention_i8 = &AttentionI8,
  };
  return kTable;
}
#else
const QuantKernelTable& Table() { return qref::Table(); }  // never selected off x86
#endif

}  // namespace kiln::cpu::qavx2
