// The vector instruction sets the CPU kernels are built for, and which of
// them this machine can run.
#pragma once

namespace kiln::cpu {

enum class Isa { kScalar, kAvx2, kAvx512 };

// "scalar", "avx2", "avx512".
const char* IsaName(Isa isa);

// Whether this CPU (as reported by GetCpuInfo, which honours KILN_ISA) runs
// the kernels built for `isa`. The scalar kernels run everywhere.
bool IsaAvailable(Isa isa);

// The widest available ISA: what kernels dispatch to unless told otherwise.
Isa BestIsa();

}  // namespace kiln::cpu
