// Intel AMX, the tile registers and their matrix multiply units. Linux hands
// a process the tiles' 8 KiB of register state only on request, so the
// kernels that use them ask here first.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// LDTILECFG's 64-byte operand (palette 1): each tile's rows and bytes per
// row; tiles left at zero are not configured.
struct AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

// Whether the AMX int8 (tdpbssd) and bf16 (tdpbf16ps) tile kernels may run:
// the CPU has them (as GetCpuInfo reports, honouring KILN_ISA), the kernel
// granted this process the tile state, and KILN_AMX=0 is not set (for
// measuring and testing the vector kernels on an AMX machine). The request
// is made once, on the first call; the grant holds for every thread.
bool AmxInt8Usable();
bool AmxBf16Usable();

}  // namespace kiln::cpu
