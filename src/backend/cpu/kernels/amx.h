// Intel AMX, the tile registers and their matrix multiply units. Linux hands
// a process the tiles' 8 KiB of register state only on request, so the
// kernels that use them ask here first.
#pragma once

namespace kiln::cpu {

// Whether the AMX int8 (tdpbssd) and bf16 (tdpbf16ps) tile kernels may run:
// the CPU has them (as GetCpuInfo reports, honouring KILN_ISA), the kernel
// granted this process the tile state, and KILN_AMX=0 is not set (for
// measuring and testing the vector kernels on an AMX machine). The request
// is made once, on the first call; the grant holds for every thread.
bool AmxInt8Usable();
bool AmxBf16Usable();

}  // namespace kiln::cpu
