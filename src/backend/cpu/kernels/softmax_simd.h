// Row softmax (fp32, max-subtracted), optionally restricted to a column
// range per row, for any Simd traits S. The sum runs in vector lanes by
// column index and is reduced in a fixed tree, so a row's result depends
// only on the row. Everything here is a template on S (see linear_simd.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/simd_math.h"

namespace kiln::cpu {

template <class S>
void VecSoftmax(const SoftmaxArgs& a) {
  constexpr int L = S::kLanes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const auto scale = S::Set1(a.scale);
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ldx;
    float* out = a.out + r * a.ldo;
    int64_t begin = a.valid_begin != nullptr ? a.valid_begin[r] : 0;
    int64_t end = a.valid_end != nullptr ? a.valid_end[r] : a.cols;
    begin = begin < 0 ? 0 : begin;
    end = end > a.cols ? a.cols : end;
    for (int64_t c = 0; c < begin && c < a.cols; ++c) out[c] = 0.0f;
    for (int64_t c = end < 0 ? 0 : end; c < a.cols; ++c) out[c] = 0.0f;
    if (begin >= end) continue;

    auto vmax = S::Set1(kNegInf);
    for (int64_t i = begin; i < end; i += L) {
      const int n = static_cast<int>(end - i < L ? end - i : L);
      vmax = S::Max(vmax, S::KeepLanes(S::Mul(S::LoadPart(x + i, n), scale), n, kNegInf));
    }
    const float row_max = S::ReduceMax(vmax);
    if (row_max == kNegInf) {  // nothing to attend to: all zeros rather than NaN
      for (int64_t c = begin; c < end; ++c) out[c] = 0.0f;
      continue;
    }
    const auto shift = S::Set1(row_max);
    auto vsum = S::Zero();
    for (int64_t i = begin; i < end; i += L) {
      const int n = static_cast<int>(end - i < L ? end - i : L);
      auto e = VecExp<S>(S::Sub(S::Mul(S::LoadPart(x + i, n), scale), shift));
      vsum = S::Add(vsum, S::KeepLanes(e, n, 0.0f));
      S::StorePart(out + i, e, n);
    }
    const auto sum = S::Set1(S::ReduceAdd(vsum));
    for (int64_t i = begin; i < end; i += L) {
      const int n = static_cast<int>(end - i < L ? end - i : L);
      S::StorePart(out + i, S::Div(S::LoadPart(out + i, n), sum), n);
    }
  }
}

}  // namespace kiln::cpu
