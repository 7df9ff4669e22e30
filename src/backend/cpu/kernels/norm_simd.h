// RMSNorm (optionally fused with the residual add) for any Simd traits S.
//
// The sum of squares runs in four vector accumulators (vector i of the row
// goes to accumulator i % 4, a partial last vector to accumulator 0), which
// are then added as (0 + 1) + (2 + 3) and reduced lane by lane in a fixed
// tree: the order depends only on the row length, so a row's result never
// depends on the batch it sits in or on the thread that computes it.
// Everything here is a template on S (see linear_simd.h for why).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cpu/kernels/kernel_table.h"

namespace kiln::cpu {

template <class S>
float VecSumOfSquares(const float* x, int64_t n) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  V acc[4] = {S::Zero(), S::Zero(), S::Zero(), S::Zero()};
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    for (int u = 0; u < 4; ++u) {
      V v = S::Load(x + i + u * L);
      acc[u] = S::Fma(v, v, acc[u]);
    }
  }
  for (int u = 0; i + L <= n; i += L, ++u) {
    V v = S::Load(x + i);
    acc[u] = S::Fma(v, v, acc[u]);
  }
  if (i < n) {
    V v = S::LoadPart(x + i, static_cast<int>(n - i));
    acc[0] = S::Fma(v, v, acc[0]);
  }
  return S::ReduceAdd(S::Add(S::Add(acc[0], acc[1]), S::Add(acc[2], acc[3])));
}

// y = (x * inv_rms) * w, the order Hugging Face's RMSNorm multiplies in.
template <class S>
void VecScaleByWeight(const float* x, float inv_rms, const float* w, float* y, int64_t n) {
  constexpr int L = S::kLanes;
  const auto s = S::Set1(inv_rms);
  int64_t i = 0;
  for (; i + L <= n; i += L) S::Store(y + i, S::Mul(S::Mul(S::Load(x + i), s), S::Load(w + i)));
  if (i < n) {
    int rest = static_cast<int>(n - i);
    S::StorePart(y + i, S::Mul(S::Mul(S::LoadPart(x + i, rest), s), S::LoadPart(w + i, rest)), rest);
  }
}

template <class S>
void VecRmsNorm(const RmsNormArgs& a) {
  constexpr int L = S::kLanes;
  const int64_t n = a.dim;
  for (int64_t t = a.t_begin; t < a.t_end; ++t) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const float* x = a.x + t * a.ldx + h * n;
      float* y = a.y + t * a.ldy + h * n;
      const float* src = x;
      if (a.residual != nullptr) {
        float* res = a.residual + t * a.ld_residual + h * n;
        const float* in = a.residual_in != nullptr ? a.residual_in + t * a.ld_residual_in + h * n : res;
        int64_t i = 0;
        for (; i + L <= n; i += L) S::Store(res + i, S::Add(S::Load(in + i), S::Load(x + i)));
        if (i < n) {
          int rest = static_cast<int>(n - i);
          S::StorePart(res + i, S::Add(S::LoadPart(in + i, rest), S::LoadPart(x + i, rest)), rest);
        }
        src = res;
      }
      const float mean = VecSumOfSquares<S>(src, n) / static_cast<float>(n);
      const float inv_rms = 1.0f / std::sqrt(mean + a.eps);
      VecScaleByWeight<S>(src, inv_rms, a.weight, y, n);
    }
  }
}

}  // namespace kiln::cpu
