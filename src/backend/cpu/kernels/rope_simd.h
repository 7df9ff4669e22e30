// Rotary position embedding, in place, for any Simd traits S.
//
// Each pair (x0, x1) becomes (x0 c - x1 s, x1 c + x0 s): two rounded
// products and a rounded sum, as Hugging Face computes q*cos +
// rotate_half(q)*sin in fp32, so the scalar reference matches bit for bit.
// Everything here is a template on S (see linear_simd.h for why).
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/kernel_table.h"

namespace kiln::cpu {

// Rotate-half pairs (i, i + half): the halves are contiguous vectors.
template <class S>
void RopeHalfRow(float* x, const float* c, const float* s, int64_t half) {
  constexpr int L = S::kLanes;
  auto rotate = [&](int64_t i, auto x0, auto x1, auto cv, auto sv, int n) {
    const auto y0 = S::Sub(S::Mul(x0, cv), S::Mul(x1, sv));
    const auto y1 = S::Add(S::Mul(x1, cv), S::Mul(x0, sv));
    if (n == L) {
      S::Store(x + i, y0);
      S::Store(x + half + i, y1);
    } else {
      S::StorePart(x + i, y0, n);
      S::StorePart(x + half + i, y1, n);
    }
  };
  int64_t i = 0;
  for (; i + L <= half; i += L)
    rotate(i, S::Load(x + i), S::Load(x + half + i), S::Load(c + i), S::Load(s + i), L);
  if (i < half) {
    const int n = static_cast<int>(half - i);
    rotate(i, S::LoadPart(x + i, n), S::LoadPart(x + half + i, n), S::LoadPart(c + i, n),
           S::LoadPart(s + i, n), n);
  }
}

// Interleaved pairs (2i, 2i+1): each vector holds kLanes/2 pairs; the
// partner comes from swapping neighbours, and x0 c - x1 s is x0 c + (-(x1 s)).
template <class S>
void RopeInterleavedRow(float* x, const float* c, const float* s, int64_t rotary_dim) {
  constexpr int L = S::kLanes;
  for (int64_t i = 0; i < rotary_dim; i += L) {
    const int n = static_cast<int>(rotary_dim - i < L ? rotary_dim - i : L);
    typename S::V cv, sv;
    if (n == L) {
      cv = S::LoadDuplicated(c + i / 2);
      sv = S::LoadDuplicated(s + i / 2);
    } else {
      float cos_part[L / 2] = {}, sin_part[L / 2] = {};
      std::memcpy(cos_part, c + i / 2, sizeof(float) * static_cast<size_t>(n / 2));
      std::memcpy(sin_part, s + i / 2, sizeof(float) * static_cast<size_t>(n / 2));
      cv = S::LoadDuplicated(cos_part);
      sv = S::LoadDuplicated(sin_part);
    }
    const auto xv = n == L ? S::Load(x + i) : S::LoadPart(x + i, n);
    const auto rotated = S::Xor(S::Mul(S::SwapPairs(xv), sv), S::EvenSignMask());
    const auto y = S::Add(S::Mul(xv, cv), rotated);
    if (n == L) {
      S::Store(x + i, y);
    } else {
      S::StorePart(x + i, y, n);
    }
  }
}

template <class S>
void VecRope(const RopeArgs& a) {
  const int64_t half = a.rotary_dim / 2;
  for (int64_t t = a.t_begin; t < a.t_end; ++t) {
    const float* c = a.cos + static_cast<int64_t>(a.positions[t]) * half;
    const float* s = a.sin + static_cast<int64_t>(a.positions[t]) * half;
    if (a.src != nullptr) {
      std::memcpy(a.x + t * a.ldx, a.src + t * a.ld_src,
                  sizeof(float) * static_cast<size_t>(a.heads * a.head_dim));
    }
    for (int64_t h = 0; h < a.heads; ++h) {
      float* x = a.x + t * a.ldx + h * a.head_dim;
      if (a.interleaved) {
        RopeInterleavedRow<S>(x, c, s, a.rotary_dim);
      } else {
        RopeHalfRow<S>(x, c, s, half);
      }
    }
  }
}

}  // namespace kiln::cpu
