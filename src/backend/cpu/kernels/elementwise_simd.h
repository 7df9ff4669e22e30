// Elementwise kernels (arithmetic, activations, type conversions) and the
// vector math entry points, for any Simd traits S. Lanes are independent,
// so results never depend on how rows are split.
// Everything here is a template on S (see linear_simd.h for why).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/simd_math.h"

namespace kiln::cpu {

// out[r, c] = f(a[r, c], b[r, c]) with f taking and returning vectors; b may
// be null for unary ops (f then gets zeros).
template <class S, class F>
void ForEachElement(const ElementwiseArgs& e, F f) {
  constexpr int L = S::kLanes;
  for (int64_t r = 0; r < e.rows; ++r) {
    const float* a = e.a + r * e.lda;
    const float* b = e.b != nullptr ? e.b + r * e.ldb : nullptr;
    float* out = e.out + r * e.ldo;
    int64_t i = 0;
    for (; i + L <= e.cols; i += L) {
      S::Store(out + i, f(S::Load(a + i), b != nullptr ? S::Load(b + i) : S::Zero()));
    }
    if (i < e.cols) {
      const int n = static_cast<int>(e.cols - i);
      S::StorePart(out + i, f(S::LoadPart(a + i, n), b != nullptr ? S::LoadPart(b + i, n) : S::Zero()), n);
    }
  }
}

template <class S>
void VecAdd(const ElementwiseArgs& e) {
  ForEachElement<S>(e, [](auto a, auto b) { return S::Add(a, b); });
}
template <class S>
void VecMul(const ElementwiseArgs& e) {
  ForEachElement<S>(e, [](auto a, auto b) { return S::Mul(a, b); });
}
template <class S>
void VecScale(const ElementwiseArgs& e) {
  const auto s = S::Set1(e.scalar);
  ForEachElement<S>(e, [s](auto a, auto) { return S::Mul(a, s); });
}
template <class S>
void VecSiluMul(const ElementwiseArgs& e) {
  ForEachElement<S>(e, [](auto a, auto b) { return S::Mul(VecSilu<S>(a), b); });
}
template <class S>
void VecGeluElementwise(const ElementwiseArgs& e) {
  ForEachElement<S>(e, [](auto a, auto) { return VecGelu<S>(a); });
}
template <class S>
void VecGeluTanhElementwise(const ElementwiseArgs& e) {
  ForEachElement<S>(e, [](auto a, auto) { return VecGeluTanh<S>(a); });
}
template <class S>
void VecGeluMul(const ElementwiseArgs& e) {
  ForEachElement<S>(e, [](auto a, auto b) { return S::Mul(VecGelu<S>(a), b); });
}
template <class S>
void VecGeluTanhMul(const ElementwiseArgs& e) {
  ForEachElement<S>(e, [](auto a, auto b) { return S::Mul(VecGeluTanh<S>(a), b); });
}

template <class S>
void VecF32ToBf16(const ConvertArgs& c) {
  constexpr int L = S::kLanes;
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* src = static_cast<const float*>(c.src) + r * c.lds;
    uint16_t* dst = static_cast<uint16_t*>(c.dst) + r * c.ldd;
    int64_t i = 0;
    for (; i + L <= c.cols; i += L) S::StoreBf16(dst + i, S::Load(src + i));
    if (i < c.cols) {
      const int n = static_cast<int>(c.cols - i);
      S::StoreBf16Part(dst + i, S::LoadPart(src + i, n), n);
    }
  }
}
template <class S>
void VecF32ToF16(const ConvertArgs& c) {
  constexpr int L = S::kLanes;
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* src = static_cast<const float*>(c.src) + r * c.lds;
    uint16_t* dst = static_cast<uint16_t*>(c.dst) + r * c.ldd;
    int64_t i = 0;
    for (; i + L <= c.cols; i += L) S::StoreF16(dst + i, S::Load(src + i));
    if (i < c.cols) {
      const int n = static_cast<int>(c.cols - i);
      S::StoreF16Part(dst + i, S::LoadPart(src + i, n), n);
    }
  }
}
template <class S>
void VecBf16ToF32(const ConvertArgs& c) {
  constexpr int L = S::kLanes;
  for (int64_t r = 0; r < c.rows; ++r) {
    const uint16_t* src = static_cast<const uint16_t*>(c.src) + r * c.lds;
    float* dst = static_cast<float*>(c.dst) + r * c.ldd;
    int64_t i = 0;
    for (; i + L <= c.cols; i += L) S::Store(dst + i, S::LoadBf16(src + i));
    if (i < c.cols) {
      const int n = static_cast<int>(c.cols - i);
      S::StorePart(dst + i, S::LoadBf16Part(src + i, n), n);
    }
  }
}
template <class S>
void VecF16ToF32(const ConvertArgs& c) {
  constexpr int L = S::kLanes;
  for (int64_t r = 0; r < c.rows; ++r) {
    const uint16_t* src = static_cast<const uint16_t*>(c.src) + r * c.lds;
    float* dst = static_cast<float*>(c.dst) + r * c.ldd;
    int64_t i = 0;
    for (; i + L <= c.cols; i += L) S::Store(dst + i, S::LoadF16(src + i));
    if (i < c.cols) {
      const int n = static_cast<int>(c.cols - i);
      S::StorePart(dst + i, S::LoadF16Part(src + i, n), n);
    }
  }
}

template <class S, class F>
void ForEachMath(const MathArgs& m, F f) {
  constexpr int L = S::kLanes;
  int64_t i = 0;
  for (; i + L <= m.n; i += L) S::Store(m.y + i, f(S::Load(m.x + i)));
  if (i < m.n) {
    const int n = static_cast<int>(m.n - i);
    S::StorePart(m.y + i, f(S::LoadPart(m.x + i, n)), n);
  }
}
template <class S>
void VecExpArray(const MathArgs& m) {
  ForEachMath<S>(m, [](auto x) { return VecExp<S>(x); });
}
template <class S>
void VecTanhArray(const MathArgs& m) {
  ForEachMath<S>(m, [](auto x) { return VecTanh<S>(x); });
}
template <class S>
void VecErfArray(const MathArgs& m) {
  ForEachMath<S>(m, [](auto x) { return VecErf<S>(x); });
}

}  // namespace kiln::cpu
