#include "backend/cpu/tensor_kernels/bf16_compute.h"

#include "core/cpu_info.h"

namespace kiln::cpu {

Expected<bool> WantsBf16Compute(const TensorKernelArgs& args) {
  if (!args.a().Has("compute_dtype")) return false;
  auto v = args.a().String("compute_dtype");
  if (!v.ok()) return v.status().WithContext(fmt::format("{} {}", args.op_type, args.node));
  if (*v == "bf16") return true;
  if (*v == "f32") return false;
  return InvalidArgument("{} {}: compute_dtype '{}' is neither f32 nor bf16", args.op_type, args.node, *v);
}

bool CpuMultipliesBf16() {
  const CpuInfo& cpu = GetCpuInfo();
  return cpu.avx512_bf16 || cpu.amx_bf16;
}

}  // namespace kiln::cpu
