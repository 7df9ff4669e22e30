// What the CPU we run on can do, read once at start-up, for run-time kernel
// dispatch and for default thread counts.
#pragma once

#include <string>

namespace kiln {

struct CpuInfo {
  std::string vendor;
  std::string model_name;
  // CPUID's family, the extended family added where the base one is 15
  // (AMD: 25 for Zen 3 and 4, 26 for Zen 5).
  int family = 0;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx_vnni = false;  // VEX-encoded vpdpbusd (Alder Lake, Zen 5)
  bool amx_bf16 = false;
  bool amx_int8 = false;
  int logical_cpus = 1;
  int physical_cores = 1;
  // One core's L2 cache (0: unknown), for kernels that fetch ahead into it.
  long l2_cache_bytes = 0;

  // The vector ISA kernels dispatch to: "avx512", "avx2" or "scalar".
  std::string BestIsa() const;
  // A one-line summary such as "AMD EPYC, 2 cores, avx2 fma f16c".
  std::string Summary() const;
};

// The process-wide CpuInfo. Honours KILN_ISA to force a lower ISA (for
// testing the fallbacks): "scalar"; "avx2", plain AVX2 as on a CPU without
// VNNI (no AVX-512, no AVX-VNNI); "avx-vnni", AVX2 with AVX-VNNI where the
// CPU has it (no AVX-512); "avx512", AVX-512 without VNNI, BF16 or AMX;
// "avx512-vnni", AVX-512 with VNNI and BF16 where the CPU has them, no AMX.
// Unset (or any other value), what the CPU has.
const CpuInfo& GetCpuInfo();

}  // namespace kiln
