// Picks the roofline loops this CPU runs, and the portable loops for CPUs
// without AVX2.
#include "bench/roofline_loops.h"

#include "backend/cpu/kernels/amx.h"
#include "core/cpu_info.h"

namespace kiln::bench {

namespace baseline {

double MulAdd(int64_t iterations) {
  // Separate multiply and add (the build does not contract them), 32
  // independent chains the compiler may vectorize with the baseline ISA.
  float acc[32];
  for (int c = 0; c < 32; ++c) acc[c] = 1.0f + 0.01f * static_cast<float>(c);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < 32; ++c) acc[c] = acc[c] * 0.999f + 0.001f;
  }
  float sum = 0;
  for (int c = 0; c < 32; ++c) sum += acc[c];
  return sum;
}

double StreamRead(const void* data, size_t bytes) {
  const float* p = static_cast<const float*>(data);
  const size_t n = bytes / sizeof(float);
  float acc[16] = {};
  for (size_t i = 0; i + 16 <= n; i += 16) {
    for (int c = 0; c < 16; ++c) acc[c] += p[i + c];
  }
  float sum = 0;
  for (int c = 0; c < 16; ++c) sum += acc[c];
  return sum;
}

}  // namespace baseline

LoopSet LoopsForThisCpu() {
  const CpuInfo& cpu = GetCpuInfo();
  const bool avx2 = cpu.avx2 && cpu.fma && cpu.f16c;
  const bool avx512 = cpu.avx512f && cpu.avx512bw && cpu.avx512vl;
  LoopSet set;
  const char* flops = "FLOP/s";
  const char* int8_ops = "OP/s";

  if (avx512) {
    set.loops.push_back({"fp32_fma", "vfmadd231ps zmm, 12 independent chains", flops, avx512::kFp32FmaOps,
                         &avx512::Fp32Fma});
  } else if (avx2) {
    set.loops.push_back({"fp32_fma", "vfmadd231ps ymm, 12 independent chains", flops, avx2::kFp32FmaOps,
                         &avx2::Fp32Fma});
  } else {
    set.loops.push_back({"fp32_fma", "mulps + addps (no FMA on this CPU), 32 chains", flops,
                         baseline::kMulAddOps, &baseline::MulAdd});
  }

  if (avx512 && cpu.avx512_bf16) {
    set.loops.push_back({"bf16_dot", "vdpbf16ps zmm, 12 independent chains", flops, avx512::kBf16DotOps,
                         &avx512::Bf16Dot});
  } else {
    set.unsupported.push_back({"bf16_dot", flops, "vdpbf16ps not supported on this CPU (no AVX512_BF16)"});
  }
  if (avx512 && cpu.avx512_vnni) {
    set.loops.push_back({"int8_dot", "vpdpbusd zmm, 12 independent chains", int8_ops, avx512::kInt8DotOps,
                         &avx512::Int8Dot});
  } else if (avx2 && cpu.avx_vnni) {
    set.loops.push_back({"int8_dot", "vpdpbusd ymm (AVX-VNNI), 8 independent chains", int8_ops,
                         avx2::kInt8DotOps, &avx2::Int8DotAvxVnni});
  } else {
    set.unsupported.push_back(
        {"int8_dot", int8_ops, "vpdpbusd not supported on this CPU (no AVX512_VNNI or AVX_VNNI)"});
  }

  if (avx2) {
    set.loops.push_back({"bf16_widen_fma", "vpslld + vpand (bf16 -> fp32) per 2 x vfmadd231ps ymm, 8 chains",
                         flops, avx2::kWidenFmaOps, &avx2::Bf16WidenFma});
    set.loops.push_back({"f16_widen_fma", "vcvtph2ps (f16 -> fp32) per vfmadd231ps ymm, 8 chains", flops,
                         avx2::kWidenFmaOps, &avx2::F16WidenFma});
    set.loops.push_back({"int8_madd", "vpmaddubsw + vpmaddwd + vpaddd ymm, 4 chains", int8_ops,
                         avx2::kInt8MaddOps, &avx2::Int8Madd});
  } else {
    set.unsupported.push_back({"bf16_widen_fma", flops, "needs AVX2, FMA and F16C"});
    set.unsupported.push_back({"f16_widen_fma", flops, "needs AVX2, FMA and F16C"});
    set.unsupported.push_back({"int8_madd", int8_ops, "needs AVX2"});
  }

  if (avx512 && cpu::AmxInt8Usable()) {
    set.loops.push_back({"amx_int8", "tdpbssd on 4 independent 16x16 int32 tiles", int8_ops, amx::kInt8TileOps,
                         &amx::Int8Tiles});
    set.loops.push_back(
        {"amx_int8_blocks",
         "tdpbssd per 32-value block, its sums stored and scaled in fp32 (kiln's same-bits steps)", int8_ops,
         amx::kInt8BlockTileOps, &amx::Int8BlockTiles});
  }
  if (avx512 && cpu::AmxBf16Usable()) {
    set.loops.push_back({"amx_bf16", "tdpbf16ps on 4 independent 16x16 fp32 tiles", flops, amx::kBf16TileOps,
                         &amx::Bf16Tiles});
  }

  if (avx512) {
    set.stream_read = &avx512::StreamRead;
    set.stream_instructions = "vaddps zmm of aligned loads, 4 chains";
  } else if (avx2) {
    set.stream_read = &avx2::StreamRead;
    set.stream_instructions = "vaddps ymm of aligned loads, 8 chains";
  } else {
    set.stream_read = &baseline::StreamRead;
    set.stream_instructions = "float adds, 16 chains";
  }
  return set;
}

}  // namespace kiln::bench
