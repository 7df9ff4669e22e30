// Picking the quantized kernel table for an ISA.
#include "backend/cpu/qkernels/qkernel_table.h"

#include "core/cpu_info.h"

namespace kiln::cpu {

const QuantKernelTable& QuantKernelsFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return qavx512::Table();
    case Isa::kAvx2: return GetCpuInfo().avx_vnni ? qavxvnni::Table() : qavx2::Table();
    case Isa::kScalar: break;
  }
  return qref::Table();
}

}  // namespace kiln::cpu
