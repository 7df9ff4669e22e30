// A constant int8 operand of the quantized products (MatMulInteger,
// QLinearMatMul, the quantized convolutions' weights) packed for kiln's
// int8 GEMM kernels (w8a8/int8_gemm_kernels.h): N output columns of K
// values w(n, k) = B's value minus its zero point, which must lie in
// [-127, 127]. Activations go to the kernels as x' = a - c (c = 128 for
// uint8, 0 for int8); the kernels give the exact int32 sums of x' w, and
// the caller adds (c - a_zp) times the column sums back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/w8a8/int8_gemm.h"
#include "core/dtype.h"
#include "graph/laid_out_weights.h"

namespace kiln::cpu {

struct Int8PackedB {
  int64_t n = 0, k = 0, kp = 0, panels = 0;
  Int8Kernel kernel = Int8Kernel::kReference;
  // K in chunks, each packed as a weight of its own: one chunk, or chunks
  // of 1024 where the sums must stay exact through the kernels' fp32 result
  // (1024 * 128 * 127 < 2^24).
  struct Chunk {
    int64_t k0 = 0, kp = 0, offset = 0;
    std::vector<int32_t> w_sum;  // padded to whole panels
  };
  std::vector<Chunk> chunks;
  std::vector<int32_t> w_sum;  // over all of K, padded to whole panels
  std::shared_ptr<std::vector<int8_t>> storage;  // null when the panels are a compiled artifact's
  const int8_t* data = nullptr;  // 64-byte aligned
  // Every chunk's w_sum, then w_sum, as recorded for an artifact.
  std::shared_ptr<const std::vector<int32_t>> recorded_sums;

  int64_t padded_n() const { return panels * 16; }
};

// Packs w (w(n, k) for n < N, k < K); false when a value is outside
// [-127, 127] or the sizes are not what the kernels take.
bool PackInt8B(int64_t n, int64_t k, bool exact_sums, const std::function<int32_t(int64_t, int64_t)>& w,
               Int8PackedB* out);

// PackInt8B for a constant of `node`: the panels and column sums a compiled
// artifact stored for it under `name` (graph/laid_out_weights.h), used where
// they are mapped, when `store` has them; otherwise packs them and records
// them there (store may be null).
bool PackInt8BFor(LaidOutWeights* store, std::string_view node, const std::string& name, int64_t n, int64_t k,
                  bool exact_sums, const std::function<int32_t(int64_t, int64_t)>& w, Int8PackedB* out);

// The byte the kernel reads for activation value a (uint8 when a_unsigned,
// else int8 as a byte): x' = a - c in the kernel's encoding.
inline uint8_t Int8KernelByte(uint8_t a, bool a_unsigned, Int8Kernel kernel) {
  const bool offset = kernel == Int8Kernel::kAvxVnni || kernel == Int8Kernel::kAvx512Vnni;
  return a_unsigned != offset ? static_cast<uint8_t>(a ^ 0x80) : a;
}

struct Int8Cell {
  const Int8PackedB* b = nullptr;
  const uint8_t* xq = nullptr;  // rows of kp kernel bytes (Int8KernelByte; zero-valued padding)
  int64_t ldxq = 0;
  const float* x_scale = nullptr;  // per row
  const float* w_scale = nullptr;  // per column, padded to whole panels
  const float* bias = nullptr;     // per column, or null
  float* y = nullptr;              // fp32 results, rows ldy apart
  int64_t ldy = 0;
  // Set: the exact int32 sums of x' w go here instead (rows ldy apart) and y
  // is scratch; x_scale and w_scale must then be all ones.
  int32_t* sums = nullptr;
};

// Rows [r0, r1) x panels [p0, p1): y = fma(sum, x_scale w_scale, bias), or
// the exact sums.
void RunInt8Cell(const Int8Cell& cell, int64_t r0, int64_t r1, int64_t p0, int64_t p1);

}  // namespace kiln::cpu
