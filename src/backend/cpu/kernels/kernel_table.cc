// Picking the kernel table for an ISA.
#include "backend/cpu/kernels/kernel_table.h"

namespace kiln::cpu {

const KernelTable& KernelsFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return avx512::Table();
    case Isa::kAvx2: return avx2::Table();
    case Isa::kScalar: break;
  }
  return ref::Table();
}

}  // namespace kiln::cpu
