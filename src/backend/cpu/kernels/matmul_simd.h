// Plain fp32 matrix products for the decomposed attention path, for any
// Simd traits S. C = A B runs each C element as one FMA chain over k in
// increasing order (vectorized across columns), so it equals the scalar
// reference bit for bit; C = A B^T takes dot products in vector lanes and a
// fixed reduction tree. Everything here is a template on S (see linear_simd.h).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_table.h"

namespace kiln::cpu {

template <class S>
void VecMatMulNN(const MatMulArgs& a) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  constexpr int kVectors = 4;  // independent chains per step
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    const float* arow = a.a + m * a.lda;
    float* crow = a.c + m * a.ldc;
    for (int64_t n0 = 0; n0 < a.n; n0 += kVectors * L) {
      int lanes[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        int64_t left = a.n - n0 - v * L;
        lanes[v] = static_cast<int>(left <= 0 ? 0 : left > L ? L : left);
      }
      V acc[kVectors] = {S::Zero(), S::Zero(), S::Zero(), S::Zero()};
      for (int64_t k = 0; k < a.k; ++k) {
        const V av = S::Set1(arow[k]);
        const float* brow = a.b + k * a.ldb + n0;
        for (int v = 0; v < kVectors; ++v) {
          if (lanes[v] == L) {
            acc[v] = S::Fma(av, S::Load(brow + v * L), acc[v]);
          } else if (lanes[v] > 0) {
            acc[v] = S::Fma(av, S::LoadPart(brow + v * L, lanes[v]), acc[v]);
          }
        }
      }
      for (int v = 0; v < kVectors; ++v) {
        if (lanes[v] == L) {
          S::Store(crow + n0 + v * L, acc[v]);
        } else if (lanes[v] > 0) {
          S::StorePart(crow + n0 + v * L, acc[v], lanes[v]);
        }
      }
    }
  }
}

template <class S>
float VecDot(const float* x, const float* y, int64_t n) {
  constexpr int L = S::kLanes;
  auto acc = S::Zero();
  int64_t i = 0;
  for (; i + L <= n; i += L) acc = S::Fma(S::Load(x + i), S::Load(y + i), acc);
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    acc = S::Fma(S::LoadPart(x + i, rest), S::LoadPart(y + i, rest), acc);
  }
  return S::ReduceAdd(acc);
}

template <class S>
void VecMatMulNT(const MatMulArgs& a) {
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    const float* arow = a.a + m * a.lda;
    float* crow = a.c + m * a.ldc;
    for (int64_t n = 0; n < a.n; ++n) crow[n] = VecDot<S>(arow, a.b + n * a.ldb, a.k);
  }
}

template <class S>
void VecMatMul(const MatMulArgs& a) {
  if (a.transpose_b) {
    VecMatMulNT<S>(a);
  } else {
    VecMatMulNN<S>(a);
  }
}

}  // namespace kiln::cpu
