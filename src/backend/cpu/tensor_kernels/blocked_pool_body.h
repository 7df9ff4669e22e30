// The loops of blocked_pool_loops.h, compiled once per ISA by the files
// that include this (each copy internal to its file). Plain loops over the
// 16 lanes, which the compiler turns into one or two vectors; no library
// inline functions, so that no copy built for a wide ISA can be the one the
// linker keeps for baseline code. Max and sums are taken in one fixed
// order, so every ISA gives the same bits.
#pragma once

#include "backend/cpu/tensor_kernels/blocked_pool_loops.h"

namespace kiln::cpu {
namespace {

constexpr int kLanes = 16;

// The 16 lanes as values of the compiler's vector extension, as wide as
// the file's ISA has registers (GCC lowers wider ones to scalar code), so
// that a window's maximum stays in registers.
#if defined(__AVX512F__)
constexpr int kVectorFloats = 16;
#elif defined(__AVX__)
constexpr int kVectorFloats = 8;
#else
constexpr int kVectorFloats = 4;
#endif
constexpr int kVectors = kLanes / kVectorFloats;
typedef float Vector __attribute__((vector_size(kVectorFloats * 4), aligned(4), may_alias));

// MaxPool rows: each output the maximum of its window's taps, the taps'
// offsets (in vectors) computed once per row.
void MaxPoolRows(const BlockedPoolJob& j, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t plane = r / j.out_h, oh = r % j.out_h;
    const float* xp = j.x + plane * j.in_h * j.in_w * kLanes;
    float* yp = j.y + (plane * j.out_h + oh) * j.out_w * kLanes;
    const BlockedPoolTaps& th = j.th[oh];
    const bool pad_lanes = plane % j.blocks == j.blocks - 1;
    for (int64_t ow = 0; ow < j.out_w; ++ow) {
      const BlockedPoolTaps& tw = j.tw[ow];
      Vector acc[kVectors];
#pragma GCC unroll 4
      for (int k = 0; k < kVectors; ++k) acc[k] = Vector{} - __builtin_huge_valf();
      for (int64_t a = th.first; a < th.end; ++a) {
        const float* row = xp + ((th.start + a * j.dilation_h) * j.in_w + tw.start) * kLanes;
        for (int64_t b = tw.first; b < tw.end; ++b) {
          const float* tap = row + b * j.dilation_w * kLanes;
#pragma GCC unroll 4
          for (int k = 0; k < kVectors; ++k) {
            const Vector v = *reinterpret_cast<const Vector*>(tap + k * kVectorFloats);
            acc[k] = v > acc[k] ? v : acc[k];
          }
        }
      }
#pragma GCC unroll 4
      for (int k = 0; k < kVectors; ++k)
        *reinterpret_cast<Vector*>(yp + ow * kLanes + k * kVectorFloats) = acc[k];
      // A window with no tap inside the input is -inf, in the real channels only.
      if ((th.end - th.first) * (tw.end - tw.first) == 0 && pad_lanes) {
        for (int64_t l = j.last_block_channels; l < kLanes; ++l) yp[ow * kLanes + l] = 0.0f;
      }
    }
  }
}

template <bool kMax>
void PoolRowsOf(const BlockedPoolJob& j, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t plane = r / j.out_h, oh = r % j.out_h;
    const float* xp = j.x + plane * j.in_h * j.in_w * kLanes;
    float* yp = j.y + (plane * j.out_h + oh) * j.out_w * kLanes;
    const BlockedPoolTaps& th = j.th[oh];
    for (int64_t ow = 0; ow < j.out_w; ++ow) {
      const BlockedPoolTaps& tw = j.tw[ow];
      float acc[kLanes];
      for (int l = 0; l < kLanes; ++l) acc[l] = kMax ? -__builtin_huge_valf() : 0.0f;
      for (int64_t a = th.first; a < th.end; ++a) {
        const float* row = xp + (th.start + a * j.dilation_h) * j.in_w * kLanes;
        for (int64_t b = tw.first; b < tw.end; ++b) {
          const float* v = row + (tw.start + b * j.dilation_w) * kLanes;
          if (kMax) {
            for (int l = 0; l < kLanes; ++l) acc[l] = v[l] > acc[l] ? v[l] : acc[l];
          } else {
            for (int l = 0; l < kLanes; ++l) acc[l] += v[l];
          }
        }
      }
      float* out = yp + ow * kLanes;
      const int64_t taps = (th.end - th.first) * (tw.end - tw.first);
      if (kMax) {
        for (int l = 0; l < kLanes; ++l) out[l] = acc[l];
        // A window with no tap inside the input is -inf, in the real channels only.
        if (taps == 0 && plane % j.blocks == j.blocks - 1) {
          for (int64_t l = j.last_block_channels; l < kLanes; ++l) out[l] = 0.0f;
        }
      } else {
        const int64_t divisor = j.count_include_pad ? th.padded * tw.padded : taps;
        if (divisor > 0) {
          const float d = static_cast<float>(divisor);
          for (int l = 0; l < kLanes; ++l) out[l] = acc[l] / d;
        } else {
          for (int l = 0; l < kLanes; ++l) out[l] = 0.0f;
        }
      }
    }
  }
}

void PoolRows(const BlockedPoolJob& j, int64_t begin, int64_t end) {
  if (j.is_max) {
    MaxPoolRows(j, begin, end);
  } else {
    PoolRowsOf<false>(j, begin, end);
  }
}

// MaxPool with stride 1 down the image: each input row's maxima across
// the window's width once per plane (in `rows`: in_h x out_w vectors), then
// the maxima of those down the window's height: KH + KW comparisons per
// output instead of KH x KW (the same result: max takes any order).
void MaxPoolPlanesSeparable(const BlockedPoolJob& j, float* rows, int64_t begin, int64_t end) {
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* xp = j.x + plane * j.in_h * j.in_w * kLanes;
    float* yp = j.y + plane * j.out_h * j.out_w * kLanes;
    for (int64_t ih = 0; ih < j.in_h; ++ih) {
      for (int64_t ow = 0; ow < j.out_w; ++ow) {
        const BlockedPoolTaps& tw = j.tw[ow];
        float acc[kLanes];
        for (int l = 0; l < kLanes; ++l) acc[l] = -__builtin_huge_valf();
        for (int64_t b = tw.first; b < tw.end; ++b) {
          const float* v = xp + (ih * j.in_w + tw.start + b * j.dilation_w) * kLanes;
          for (int l = 0; l < kLanes; ++l) acc[l] = v[l] > acc[l] ? v[l] : acc[l];
        }
        float* h = rows + (ih * j.out_w + ow) * kLanes;
        for (int l = 0; l < kLanes; ++l) h[l] = acc[l];
      }
    }
    for (int64_t oh = 0; oh < j.out_h; ++oh) {
      const BlockedPoolTaps& th = j.th[oh];
      for (int64_t ow = 0; ow < j.out_w; ++ow) {
        float acc[kLanes];
        for (int l = 0; l < kLanes; ++l) acc[l] = -__builtin_huge_valf();
        for (int64_t a = th.first; a < th.end; ++a) {
          const float* v = rows + ((th.start + a * j.dilation_h) * j.out_w + ow) * kLanes;
          for (int l = 0; l < kLanes; ++l) acc[l] = v[l] > acc[l] ? v[l] : acc[l];
        }
        float* out = yp + (oh * j.out_w + ow) * kLanes;
        for (int l = 0; l < kLanes; ++l) out[l] = acc[l];
        const BlockedPoolTaps& tw = j.tw[ow];
        if ((th.end - th.first) * (tw.end - tw.first) == 0 && plane % j.blocks == j.blocks - 1) {
          for (int64_t l = j.last_block_channels; l < kLanes; ++l) out[l] = 0.0f;
        }
      }
    }
  }
}

void GlobalPool(const BlockedGlobalPoolJob& j, int64_t begin, int64_t end) {
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* xp = j.x + plane * j.pixels * kLanes;
    float* out = j.y + plane * kLanes;
    if (j.is_max) {
      float acc[kLanes];
      for (int l = 0; l < kLanes; ++l) acc[l] = xp[l];
      for (int64_t p = 1; p < j.pixels; ++p) {
        const float* v = xp + p * kLanes;
        for (int l = 0; l < kLanes; ++l) acc[l] = v[l] > acc[l] ? v[l] : acc[l];
      }
      for (int l = 0; l < kLanes; ++l) out[l] = acc[l];
    } else {
      // Four partial sums per lane: independent adds, and less rounding on large planes.
      float part[4][kLanes] = {};
      int64_t p = 0;
      for (; p + 4 <= j.pixels; p += 4) {
        for (int k = 0; k < 4; ++k) {
          const float* v = xp + (p + k) * kLanes;
          for (int l = 0; l < kLanes; ++l) part[k][l] += v[l];
        }
      }
      for (; p < j.pixels; ++p) {
        const float* v = xp + p * kLanes;
        for (int l = 0; l < kLanes; ++l) part[0][l] += v[l];
      }
      const float count = static_cast<float>(j.pixels);
      for (int l = 0; l < kLanes; ++l)
        out[l] = ((part[0][l] + part[1][l]) + (part[2][l] + part[3][l])) / count;
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
