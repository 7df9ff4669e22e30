// ISA availability from the CPU features.
#include "backend/cpu/kernels/isa.h"

#include "core/cpu_info.h"

namespace kiln::cpu {

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool IsaAvailable(Isa isa) {
#if defined(__x86_64__)
  const CpuInfo& cpu = GetCpuInfo();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return cpu.avx2 && cpu.fma && cpu.f16c;
    case Isa::kAvx512: return cpu.BestIsa() == "avx512";
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

Isa BestIsa() {
  static const Isa best = IsaAvailable(Isa::kAvx512) ? Isa::kAvx512
                          : IsaAvailable(Isa::kAvx2) ? Isa::kAvx2
                                                     : Isa::kScalar;
  return best;
}

}  // namespace kiln::cpu
