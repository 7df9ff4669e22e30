// ISA selection: availability follows the CPU and KILN_ISA, and the tables
// dispatch to the ISA asked for.
#include "backend/cpu/kernels/isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "backend/cpu/kernels/kernel_context.h"
#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/qkernels/qkernel_table.h"
#include "core/cpu_info.h"

namespace kiln::cpu {
namespace isa_tests {

TEST(Isa, NamesAndTables) {
  EXPECT_STREQ(IsaName(Isa::kScalar), "scalar");
  EXPECT_STREQ(IsaName(Isa::kAvx2), "avx2");
  EXPECT_STREQ(IsaName(Isa::kAvx512), "avx512");
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (IsaAvailable(isa)) {
      EXPECT_EQ(KernelsFor(isa).isa, isa);
    }
  }
}

TEST(Isa, BestFollowsTheCpuAndTheEnvironment) {
  EXPECT_TRUE(IsaAvailable(Isa::kScalar));
  EXPECT_EQ(IsaName(BestIsa()), GetCpuInfo().BestIsa());
  EXPECT_TRUE(IsaAvailable(BestIsa()));
  EXPECT_EQ(KernelContext{}.isa, BestIsa());
  const char* forced = std::getenv("KILN_ISA");
  if (forced != nullptr && std::string(forced) == "scalar") {
    EXPECT_EQ(BestIsa(), Isa::kScalar);
    EXPECT_FALSE(IsaAvailable(Isa::kAvx2));
  }
  if (forced != nullptr && (std::string(forced) == "avx2" || std::string(forced) == "avx-vnni")) {
    EXPECT_FALSE(IsaAvailable(Isa::kAvx512));
  }
  if (forced != nullptr && std::string(forced) == "avx2") {
    EXPECT_FALSE(GetCpuInfo().avx_vnni);
  }
  // The AVX-512 levels keep AVX-512 where the CPU has it and drop AMX;
  // plain "avx512" drops VNNI and BF16 too.
  if (forced != nullptr && (std::string(forced) == "avx512" || std::string(forced) == "avx512-vnni")) {
    EXPECT_FALSE(GetCpuInfo().amx_int8 || GetCpuInfo().amx_bf16);
  }
  if (forced != nullptr && std::string(forced) == "avx512") {
    EXPECT_FALSE(GetCpuInfo().avx512_vnni || GetCpuInfo().avx512_bf16 || GetCpuInfo().avx_vnni);
    EXPECT_STREQ(QuantKernelsFor(Isa::kAvx512).name, "avx512");
  }
  if (IsaAvailable(Isa::kAvx512)) {
    EXPECT_TRUE(IsaAvailable(Isa::kAvx2));
  }
}

// The family kernel choices name (Zen 5: 26) is CPUID's, extended where the
// base family is 15, as the kernel's /proc/cpuinfo reports it.
TEST(CpuInfo, FamilyMatchesTheKernelsReport) {
  const CpuInfo& cpu = GetCpuInfo();
  if (cpu.vendor.empty()) GTEST_SKIP() << "no CPUID";
  EXPECT_GT(cpu.family, 0);
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    if (line.rfind("cpu family", 0) == 0) {
      EXPECT_EQ(std::to_string(cpu.family), line.substr(line.find(':') + 2)) << line;
      break;
    }
  }
}

}  // namespace isa_tests
}  // namespace kiln::cpu
