#include "backend/cpu/tensor_kernels/bf16_compute.h"

#include <cstdlib>
#include <string>

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
  if (cpu.avx512_bf16 || cpu.amx_bf16) return true;
  // Read at every kernel made (not once): a test sets it in-process.
  const char* emulated = std::getenv("KILN_BF16_PRODUCTS");
  return emulated != nullptr && std::string(emulated) == "emulated" && cpu.BestIsa() == "avx512";
}

}  // namespace kiln::cpu
