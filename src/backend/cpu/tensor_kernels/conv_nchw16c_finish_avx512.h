// The epilogue every AVX-512 loop of kiln's nchw16c convolutions ends in
// (conv_nchw16c.h): bias, residual and activation on one finished vector,
// and the mask that keeps a block's padding lanes zero. Included only by
// files compiled for AVX-512.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/kernels/simd_avx512.h"
#include "backend/cpu/tensor_kernels/conv2d_simd.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"

namespace kiln::cpu {

// Bias, residual and activation on one finished vector of block `ob`; lanes
// past the real channels become zero.
inline __m512 FinishBlockedVector(const BlockedConvPlan& p, __m512 v, __m512 bias, const float* residual,
                                  __mmask16 keep) {
  v = _mm512_add_ps(v, bias);
  if (residual == nullptr) {
    v = ConvActivate<SimdAvx512>(p.epilogue, v);
  } else if (p.epilogue.residual_before_activation) {
    v = ConvActivate<SimdAvx512>(p.epilogue, _mm512_add_ps(v, _mm512_loadu_ps(residual)));
  } else {
    v = _mm512_add_ps(ConvActivate<SimdAvx512>(p.epilogue, v), _mm512_loadu_ps(residual));
  }
  return _mm512_maskz_mov_ps(keep, v);
}

// The lanes of output block `ob` that hold real channels.
inline __mmask16 BlockedKeepMask(const BlockedConvPlan& p, int64_t ob) {
  const int64_t real = std::min<int64_t>(16, p.g.out_channels - ob * 16);
  return static_cast<__mmask16>(real >= 16 ? 0xFFFF : ((1u << real) - 1u));
}

}  // namespace kiln::cpu
