// The vector kernels of tensor_vec.h for any Simd traits S (SimdAvx2,
// SimdAvx512). Included only by the ISA translation units; it calls no
// library inline functions, so that no copy compiled for a wide ISA can be
// the one the linker keeps for baseline code.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/simd_math.h"
#include "backend/cpu/tensor_kernels/tensor_vec.h"

namespace kiln::cpu {

template <class S, class F>
void VecMapUnary(const float* x, float* y, int64_t n, F f) {
  constexpr int L = S::kLanes;
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const auto v0 = f(S::Load(x + i));
    const auto v1 = f(S::Load(x + i + L));
    S::Store(y + i, v0);
    S::Store(y + i + L, v1);
  }
  for (; i + L <= n; i += L) S::Store(y + i, f(S::Load(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    S::StorePart(y + i, f(S::LoadPart(x + i, rest)), rest);
  }
}

template <class S>
typename S::V VecSigmoid(typename S::V x) {
  const auto e = VecExp<S>(S::Sub(S::Zero(), x));
  return S::Div(S::Set1(1.0f), S::Add(S::Set1(1.0f), e));
}

template <class S>
void VecTensorUnary(VecUnaryOp op, float alpha, float beta, const float* x, float* y, int64_t n) {
  using V = typename S::V;
  const V zero = S::Zero();
  const V one = S::Set1(1.0f);
  const V va = S::Set1(alpha);
  const V vb = S::Set1(beta);
  switch (op) {
    case VecUnaryOp::kRelu:  // max(0, x) keeps a NaN x (the second operand wins on NaN)
      return VecMapUnary<S>(x, y, n, [&](V v) { return S::Max(zero, v); });
    case VecUnaryOp::kLeakyRelu:
      return VecMapUnary<S>(x, y, n, [&](V v) { return S::Select(S::Less(v, zero), S::Mul(v, va), v); });
    case VecUnaryOp::kHardSigmoid:
      return VecMapUnary<S>(x, y, n, [&](V v) { return S::Min(one, S::Max(zero, S::Fma(v, va, vb))); });
    case VecUnaryOp::kHardSwish: {
      const V sixth = S::Set1(1.0f / 6.0f);
      const V half = S::Set1(0.5f);
      return VecMapUnary<S>(
          x, y, n, [&](V v) { return S::Mul(v, S::Min(one, S::Max(zero, S::Fma(v, sixth, half)))); });
    }
    case VecUnaryOp::kSigmoid: return VecMapUnary<S>(x, y, n, [](V v) { return VecSigmoid<S>(v); });
    case VecUnaryOp::kSilu: return VecMapUnary<S>(x, y, n, [](V v) { return VecSilu<S>(v); });
    case VecUnaryOp::kTanh: return VecMapUnary<S>(x, y, n, [](V v) { return VecTanh<S>(v); });
    case VecUnaryOp::kExp: return VecMapUnary<S>(x, y, n, [](V v) { return VecExp<S>(v); });
    case VecUnaryOp::kErf: return VecMapUnary<S>(x, y, n, [](V v) { return VecErf<S>(v); });
    case VecUnaryOp::kGelu: return VecMapUnary<S>(x, y, n, [](V v) { return VecGelu<S>(v); });
    case VecUnaryOp::kGeluTanh: return VecMapUnary<S>(x, y, n, [](V v) { return VecGeluTanh<S>(v); });
  }
}

// One operand pattern of a binary op: a and b vectors, or one a scalar.
template <class S, class F>
void VecMapBinary(const float* a, int64_t a_step, const float* b, int64_t b_step, float* out, int64_t n,
                  F f) {
  constexpr int L = S::kLanes;
  int64_t i = 0;
  if (a_step != 0 && b_step != 0) {
    for (; i + L <= n; i += L) S::Store(out + i, f(S::Load(a + i), S::Load(b + i)));
    if (i < n) {
      const int rest = static_cast<int>(n - i);
      S::StorePart(out + i, f(S::LoadPart(a + i, rest), S::LoadPart(b + i, rest)), rest);
    }
  } else if (a_step != 0) {
    const auto vb = S::Set1(*b);
    for (; i + L <= n; i += L) S::Store(out + i, f(S::Load(a + i), vb));
    if (i < n) {
      const int rest = static_cast<int>(n - i);
      S::StorePart(out + i, f(S::LoadPart(a + i, rest), vb), rest);
    }
  } else if (b_step != 0) {
    const auto va = S::Set1(*a);
    for (; i + L <= n; i += L) S::Store(out + i, f(va, S::Load(b + i)));
    if (i < n) {
      const int rest = static_cast<int>(n - i);
      S::StorePart(out + i, f(va, S::LoadPart(b + i, rest)), rest);
    }
  } else {
    const auto v = f(S::Set1(*a), S::Set1(*b));
    for (; i + L <= n; i += L) S::Store(out + i, v);
    if (i < n) S::StorePart(out + i, v, static_cast<int>(n - i));
  }
}

template <class S>
void VecTensorBinary(VecBinaryOp op, const float* a, int64_t a_step, const float* b, int64_t b_step,
                     float* out, int64_t n) {
  using V = typename S::V;
  switch (op) {
    case VecBinaryOp::kAdd:
      return VecMapBinary<S>(a, a_step, b, b_step, out, n, [](V x, V y) { return S::Add(x, y); });
    case VecBinaryOp::kSub:
      return VecMapBinary<S>(a, a_step, b, b_step, out, n, [](V x, V y) { return S::Sub(x, y); });
    case VecBinaryOp::kMul:
      return VecMapBinary<S>(a, a_step, b, b_step, out, n, [](V x, V y) { return S::Mul(x, y); });
    case VecBinaryOp::kDiv:
      return VecMapBinary<S>(a, a_step, b, b_step, out, n, [](V x, V y) { return S::Div(x, y); });
  }
}

template <class S>
void VecTensorSoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols, bool log) {
  constexpr int L = S::kLanes;
  const float kNegInf = -__builtin_inff();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    auto vmax = S::Set1(kNegInf);
    int64_t i = 0;
    for (; i + L <= cols; i += L) vmax = S::Max(vmax, S::Load(xr + i));
    if (i < cols) vmax = S::Max(vmax, S::LoadPart(xr + i, static_cast<int>(cols - i), kNegInf));
    const float row_max = S::ReduceMax(vmax);
    const auto shift = S::Set1(row_max);
    auto vsum = S::Zero();
    for (i = 0; i + L <= cols; i += L) {
      const auto e = VecExp<S>(S::Sub(S::Load(xr + i), shift));
      vsum = S::Add(vsum, e);
      if (!log) S::Store(yr + i, e);
    }
    if (i < cols) {
      const int rest = static_cast<int>(cols - i);
      const auto e = S::KeepLanes(VecExp<S>(S::Sub(S::LoadPart(xr + i, rest), shift)), rest, 0.0f);
      vsum = S::Add(vsum, e);
      if (!log) S::StorePart(yr + i, e, rest);
    }
    const float sum = S::ReduceAdd(vsum);
    if (log) {
      // (x - max) - log(sum): the shift first, so that large inputs keep their digits.
      const auto log_sum = S::Set1(__builtin_logf(sum));
      VecMapUnary<S>(xr, yr, cols, [&](typename S::V v) { return S::Sub(S::Sub(v, shift), log_sum); });
    } else {
      const auto inv = S::Set1(1.0f / sum);
      VecMapUnary<S>(yr, yr, cols, [&](typename S::V v) { return S::Mul(v, inv); });
    }
  }
}

template <class S>
void VecTensorLayerNormRows(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                            int64_t cols, float epsilon, float* mean_out, float* inv_std_out) {
  constexpr int L = S::kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    auto acc0 = S::Zero();
    auto acc1 = S::Zero();
    int64_t i = 0;
    for (; i + 2 * L <= cols; i += 2 * L) {
      acc0 = S::Add(acc0, S::Load(xr + i));
      acc1 = S::Add(acc1, S::Load(xr + i + L));
    }
    for (; i + L <= cols; i += L) acc0 = S::Add(acc0, S::Load(xr + i));
    if (i < cols) acc1 = S::Add(acc1, S::LoadPart(xr + i, static_cast<int>(cols - i)));
    const float mean = S::ReduceAdd(S::Add(acc0, acc1)) / static_cast<float>(cols);
    const auto vmean = S::Set1(mean);
    acc0 = S::Zero();
    acc1 = S::Zero();
    for (i = 0; i + 2 * L <= cols; i += 2 * L) {
      const auto d0 = S::Sub(S::Load(xr + i), vmean);
      const auto d1 = S::Sub(S::Load(xr + i + L), vmean);
      acc0 = S::Fma(d0, d0, acc0);
      acc1 = S::Fma(d1, d1, acc1);
    }
    for (; i + L <= cols; i += L) {
      const auto d = S::Sub(S::Load(xr + i), vmean);
      acc0 = S::Fma(d, d, acc0);
    }
    if (i < cols) {
      const auto d = S::KeepLanes(S::Sub(S::LoadPart(xr + i, static_cast<int>(cols - i)), vmean),
                                  static_cast<int>(cols - i), 0.0f);
      acc1 = S::Fma(d, d, acc1);
    }
    const float var = S::ReduceAdd(S::Add(acc0, acc1)) / static_cast<float>(cols);
    const float inv_std = 1.0f / __builtin_sqrtf(var + epsilon);
    if (mean_out != nullptr) mean_out[r] = mean;
    if (inv_std_out != nullptr) inv_std_out[r] = inv_std;
    const auto vinv = S::Set1(inv_std);
    for (i = 0; i < cols; i += L) {
      const int rest = static_cast<int>(cols - i < L ? cols - i : L);
      const auto norm = S::Mul(S::Sub(S::LoadPart(xr + i, rest), vmean), vinv);
      const auto b = bias != nullptr ? S::LoadPart(bias + i, rest) : S::Zero();
      S::StorePart(yr + i, S::Fma(norm, S::LoadPart(scale + i, rest), b), rest);
    }
  }
}

template <class S>
constexpr TensorVecTable MakeTensorVecTable(Isa isa) {
  return TensorVecTable{isa, &VecTensorBinary<S>, &VecTensorUnary<S>, &VecTensorSoftmaxRows<S>,
                        &VecTensorLayerNormRows<S>};
}

}  // namespace kiln::cpu
