// Asking Linux for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM).
#include "backend/cpu/kernels/amx.h"

#include <cstdlib>
#include <cstring>

#include "core/cpu_info.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kiln::cpu {
namespace {

bool TileStateGranted() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
  constexpr long kXfeatureXtileData = 18;     // the tile data's XSAVE component
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
#else
  return false;
#endif
}

bool AmxAllowed() {
  static const bool allowed = [] {
    const char* env = std::getenv("KILN_AMX");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    const CpuInfo& cpu = GetCpuInfo();
    return (cpu.amx_int8 || cpu.amx_bf16) && TileStateGranted();
  }();
  return allowed;
}

}  // namespace

bool AmxInt8Usable() {
  return GetCpuInfo().amx_int8 && AmxAllowed();
}
bool AmxBf16Usable() {
  return GetCpuInfo().amx_bf16 && AmxAllowed();
}

}  // namespace kiln::cpu
