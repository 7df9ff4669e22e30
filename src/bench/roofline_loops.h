// The loops that measure a CPU's limits: register-resident arithmetic (no
// memory traffic, enough independent chains to hide each instruction's
// latency) and a streaming read. One set per instruction set; each loop
// returns a checksum so that the compiler keeps the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::bench {

// A register-resident loop: run(n) performs n iterations of
// ops_per_iteration operations (FLOPs, or int8 multiply-adds counted as two
// operations like FLOPs).
struct ComputeLoop {
  std::string name;          // "fp32_fma", "bf16_dot", "int8_dot", ...
  std::string instructions;  // what one iteration issues
  std::string unit;          // "FLOP/s" or "OP/s" (int8 multiply-adds counted as two)
  double ops_per_iteration = 0;
  double (*run)(int64_t iterations) = nullptr;
};

// A loop this CPU cannot run, and why.
struct UnsupportedLoop {
  std::string name;
  std::string unit;
  std::string reason;  // "not supported on this CPU (no AVX512_BF16)"
};

// The compute loops for this CPU (as GetCpuInfo reports it, honouring
// KILN_ISA), in a fixed order: fp32 FMA; the native bf16 and int8 dot
// products where the CPU has them; and what kiln's kernels do instead:
// bf16 and f16 widened to fp32 then FMA, and int8 through
// vpmaddubsw + vpmaddwd; last, where the CPU has AMX, the tile units' int8
// and bf16 rates (which kiln's many-row int8 products run on; the peaks the
// other modes compare with stay the vector dot products).
struct LoopSet {
  std::vector<ComputeLoop> loops;
  std::vector<UnsupportedLoop> unsupported;
  // Sums `bytes` (a multiple of 256, 64-byte aligned) with the widest
  // vector loads the CPU has; returns the sum.
  double (*stream_read)(const void* data, size_t bytes) = nullptr;
  std::string stream_instructions;
};
LoopSet LoopsForThisCpu();

// Per instruction set; each is only called when the CPU has that ISA.
namespace baseline {
double MulAdd(int64_t iterations);
double StreamRead(const void* data, size_t bytes);
inline constexpr double kMulAddOps = 2 * 32;  // 32 independent multiply-add chains
}  // namespace baseline

namespace avx2 {
double Fp32Fma(int64_t iterations);
double Bf16WidenFma(int64_t iterations);
double F16WidenFma(int64_t iterations);
double Int8Madd(int64_t iterations);
double Int8DotAvxVnni(int64_t iterations);  // REQUIRES: AVX_VNNI
double StreamRead(const void* data, size_t bytes);
// Independent chains: enough to cover FMA latency (4 cycles) on two FMA
// units; the widening and int8 loops use fewer so that their sources stay
// in the 16 ymm registers too.
inline constexpr int kChains = 12;
inline constexpr int kWidenChains = 8;
inline constexpr int kInt8MaddChains = 4;
inline constexpr int kVnniChains = 8;
inline constexpr double kFp32FmaOps = kChains * 8 * 2;
inline constexpr double kWidenFmaOps = kWidenChains * 8 * 2;
inline constexpr double kInt8MaddOps = kInt8MaddChains * 32 * 2;
inline constexpr double kInt8DotOps = kVnniChains * 32 * 2;
}  // namespace avx2

namespace avx512 {
double Fp32Fma(int64_t iterations);
double Bf16Dot(int64_t iterations);  // REQUIRES: AVX512_BF16
double Int8Dot(int64_t iterations);  // REQUIRES: AVX512_VNNI
double StreamRead(const void* data, size_t bytes);
inline constexpr int kChains = 12;
inline constexpr double kFp32FmaOps = kChains * 16 * 2;
inline constexpr double kBf16DotOps = kChains * 32 * 2;
inline constexpr double kInt8DotOps = kChains * 64 * 2;
}  // namespace avx512

namespace amx {
double Int8Tiles(int64_t iterations);  // REQUIRES: AmxInt8Usable()
double Bf16Tiles(int64_t iterations);  // REQUIRES: AmxBf16Usable()
// Int8Tiles as kiln's block-quantized GEMM must run them: per 32-value
// block a tdpbssd into a zeroed tile, its int32 sums stored and every row
// scaled into fp32 accumulators (acc = fma(d_w * d_x, float(sum), acc)),
// the tiles two blocks ahead of the vector units; operands in L1.
double Int8BlockTiles(int64_t iterations);  // REQUIRES: AmxInt8Usable()
// Four 16 x 16 accumulators a step, each over 64 int8 or 32 bf16 pairs.
inline constexpr double kInt8TileOps = 4 * 16 * 16 * 64 * 2;
inline constexpr double kBf16TileOps = 4 * 16 * 16 * 32 * 2;
// Four blocks of 16 x 16 x 32 products a step.
inline constexpr double kInt8BlockTileOps = 4 * 16 * 16 * 32 * 2;
}  // namespace amx

}  // namespace kiln::bench
