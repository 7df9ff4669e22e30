// The per-kernel entry points of the int8 GEMM (int8_gemm.cc splits the work
// and calls them on each thread). Plain data only: included by the ISA files.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// y[m, n] = fma(float(sum_k xq[m, k] * wq[n, k]), x_scale[m] * w_scale[n],
// bias[n] or 0) for m in [m_begin, m_end) and n in the panels
// [panel_begin, panel_end) (n < n_total).
struct Int8GemmArgs {
  // Quantized activations, `kp` bytes per row (zero padded). Two's
  // complement int8, or for the VNNI kernels int8 + 128 as uint8.
  const uint8_t* xq;
  int64_t ldxq;
  const float* x_scale;
  const int8_t* w_panels;  // Int8Weight::panel_data()
  const float* w_scale;    // per n, padded to whole panels
  const int32_t* w_sum;    // per n: sum_k wq[n, k]
  int64_t n_total;
  int64_t kp;  // padded K, a multiple of 4
  const float* bias;  // null: none
  float* y;
  int64_t ldy;
  int64_t m_begin, m_end;
  int64_t panel_begin, panel_end;
};

void Int8GemmReference(const Int8GemmArgs& a);
void Int8GemmAvx2(const Int8GemmArgs& a);
void Int8GemmAvxVnni(const Int8GemmArgs& a);
void Int8GemmAvx512Vnni(const Int8GemmArgs& a);

}  // namespace kiln::cpu
