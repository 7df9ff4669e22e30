// CPUID-based feature detection (x86) with portable fallbacks.
#include "core/cpu_info.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KILN_X86 1
#endif

namespace kiln {
namespace {

#if KILN_X86
uint64_t Xgetbv() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

void DetectX86(CpuInfo& info) {
  unsigned a, b, c, d;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  char vendor[13] = {};
  __cpuid(0, a, b, c, d);
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  info.vendor = vendor;

  __cpuid(1, a, b, c, d);
  const int base_family = static_cast<int>((a >> 8) & 0xf);
  info.family = base_family == 0xf ? base_family + static_cast<int>((a >> 20) & 0xff) : base_family;
  bool osxsave = (c >> 27) & 1;
  uint64_t xcr0 = osxsave ? Xgetbv() : 0;
  bool ymm_os = (xcr0 & 0x6) == 0x6;
  bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  bool amx_os = (xcr0 & 0x60000) == 0x60000;
  info.fma = ((c >> 12) & 1) && ymm_os;
  info.f16c = ((c >> 29) & 1) && ymm_os;

  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    info.avx2 = ((b >> 5) & 1) && ymm_os;
    info.avx512f = ((b >> 16) & 1) && zmm_os;
    info.avx512bw = ((b >> 30) & 1) && zmm_os;
    info.avx512vl = ((b >> 31) & 1) && zmm_os;
    info.avx512_vnni = ((c >> 11) & 1) && zmm_os;
    info.amx_bf16 = ((d >> 22) & 1) && amx_os;
    info.amx_int8 = ((d >> 25) & 1) && amx_os;
    __cpuid_count(7, 1, a, b, c, d);
    info.avx_vnni = ((a >> 4) & 1) && ymm_os;
    info.avx512_bf16 = ((a >> 5) & 1) && zmm_os;
  }

  unsigned ext = __get_cpuid_max(0x80000000, nullptr);
  if (ext >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __cpuid(0x80000002 + i, a, b, c, d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
    std::string s(brand);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    size_t start = s.find_first_not_of(' ');
    info.model_name = start == std::string::npos ? "" : s.substr(start);
  }
}
#endif

// Counts distinct (physical id, core id) pairs in /proc/cpuinfo.
int CountPhysicalCores() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0, core = -1;
  while (std::getline(in, line)) {
    auto value = [&]() { return std::atoi(line.substr(line.find(':') + 1).c_str()); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) {
      core = value();
      cores.insert({phys, core});
    }
  }
  return static_cast<int>(cores.size());
}

CpuInfo Detect() {
  CpuInfo info;
#if KILN_X86
  DetectX86(info);
#endif
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  info.logical_cpus = n > 0 ? static_cast<int>(n) : 1;
  int phys = CountPhysicalCores();
  info.physical_cores = phys > 0 ? std::min(phys, info.logical_cpus) : info.logical_cpus;
#ifdef _SC_LEVEL2_CACHE_SIZE
  const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  info.l2_cache_bytes = l2 > 0 ? l2 : 0;
#endif

  if (const char* isa = std::getenv("KILN_ISA")) {
    std::string v(isa);
    if (v == "scalar" || v == "avx2" || v == "avx-vnni") {
      info.avx512f = info.avx512bw = info.avx512vl = false;
      info.avx512_vnni = info.avx512_bf16 = false;
      info.amx_bf16 = info.amx_int8 = false;
    }
    if (v == "scalar" || v == "avx2" || v == "avx512") info.avx_vnni = false;
    if (v == "scalar") info.avx2 = info.fma = info.f16c = false;
    // The AVX-512 levels below AMX: "avx512" as on a CPU of the Skylake-X
    // class (no VNNI, no BF16), "avx512-vnni" as on one of the Ice Lake or
    // Zen 4 and 5 classes (VNNI and, where the CPU has it, BF16).
    if (v == "avx512" || v == "avx512-vnni") info.amx_bf16 = info.amx_int8 = false;
    if (v == "avx512") info.avx512_vnni = info.avx512_bf16 = false;
  }
  return info;
}

}  // namespace

std::string CpuInfo::BestIsa() const {
  if (avx512f && avx512bw && avx512vl && fma && f16c) return "avx512";
  if (avx2 && fma && f16c) return "avx2";
  return "scalar";
}

std::string CpuInfo::Summary() const {
  std::string feats;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!feats.empty()) feats += ' ';
    feats += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(avx_vnni, "avx_vnni");
  add(amx_bf16, "amx_bf16");
  add(amx_int8, "amx_int8");
  return fmt::format("{}, {} cores ({} logical), {}", model_name.empty() ? vendor : model_name,
                     physical_cores, logical_cpus, feats.empty() ? "no vector extensions" : feats);
}

const CpuInfo& GetCpuInfo() {
  static const CpuInfo info = Detect();
  return info;
}

}  // namespace kiln
