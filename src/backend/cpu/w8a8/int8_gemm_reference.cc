// The scalar int8 GEMM: the definition the vector kernels are tested against.
#include <cmath>

#include "backend/cpu/w8a8/int8_gemm_kernels.h"
#include "backend/cpu/w8a8/int8_weight.h"

namespace kiln::cpu {

void Int8GemmReference(const Int8GemmArgs& a) {
  const int64_t groups = a.kp / kInt8GroupK;
  for (int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    const int8_t* panel = a.w_panels + p * groups * kInt8PanelRows * kInt8GroupK;
    for (int64_t r = 0; r < kInt8PanelRows; ++r) {
      const int64_t n = p * kInt8PanelRows + r;
      if (n >= a.n_total) break;
      const float bias = a.bias != nullptr ? a.bias[n] : 0.0f;
      for (int64_t m = a.m_begin; m < a.m_end; ++m) {
        const auto* x = reinterpret_cast<const int8_t*>(a.xq + m * a.ldxq);
        int32_t sum = 0;
        for (int64_t g = 0; g < groups; ++g) {
          const int8_t* w = panel + (g * kInt8PanelRows + r) * kInt8GroupK;
          for (int j = 0; j < kInt8GroupK; ++j) sum += static_cast<int32_t>(x[g * kInt8GroupK + j]) * w[j];
        }
        a.y[m * a.ldy + n] = std::fma(static_cast<float>(sum), a.x_scale[m] * a.w_scale[n], bias);
      }
    }
  }
}

}  // namespace kiln::cpu
