// The k-quant reference quantizers. The search follows ggml's reference
// (the same candidate grids, weights and float operations in the same
// order), because llama.cpp's files are the test of agreement: where the
// arithmetic matches, the bytes do.
#include "quant/quantize_kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/dequantize.h"
#include "quant/ggml_blocks.h"

namespace kiln {
namespace {

// Below this a group of values counts as all zeros.
constexpr float kNegligible = 1e-15f;

// Round half to even (the default rounding mode), saturating far outside
// any level range so that no input reaches an undefined conversion.
int NearestInt(float v) {
  if (!(v > -1e9f && v < 1e9f)) return v > 0 ? 1000000000 : -1000000000;
  return static_cast<int>(std::nearbyint(v));
}

// Levels q in [0, max_q] with x ≈ scale * q + offset (offset <= 0) for n
// values, minimizing sum w * (scale * q + offset - x)^2: start from the grid
// spanning [min(x, 0), max(x)], then try grids of max_q + rmin + rdelta * s
// steps (s = 0..steps) over [best offset so far, max(x)], refit scale and
// offset by weighted least squares for each, and keep the best. Returns the
// scale; *neg_offset = -offset >= 0.
float FitAffineLevels(int n, int max_q, const float* x, const float* w, uint8_t* levels, float* neg_offset,
                      uint8_t* trial, float rmin, float rdelta, int steps) {
  float lo = x[0], hi = x[0];
  float sum_w = 0, sum_x = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(levels, levels + n, 0);
    *neg_offset = -lo;
    return 0.0f;
  }
  float inv_scale = static_cast<float>(max_q) / (hi - lo);
  float scale = 1 / inv_scale;
  // The best offset so far; like ggml, later grids start from it rather
  // than from min(x, 0).
  float offset = lo;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(std::clamp(NearestInt(inv_scale * (x[i] - offset)), 0, max_q));
    float diff = scale * levels[i] + offset - x[i];
    best_error += w[i] * (diff * diff);
  }
  for (int s = 0; s <= steps; ++s) {
    inv_scale = (rmin + rdelta * static_cast<float>(s) + static_cast<float>(max_q)) / (hi - offset);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::clamp(NearestInt(inv_scale * (x[i] - offset)), 0, max_q);
      trial[i] = static_cast<uint8_t>(l);
      auto lf = static_cast<float>(l);
      sum_l += w[i] * lf;
      sum_l2 += w[i] * lf * lf;
      sum_xl += w[i] * lf * x[i];
    }
    float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float fit_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float fit_offset = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (fit_offset > 0) {
      // An offset above zero could not be stored (mins are subtracted).
      fit_offset = 0;
      fit_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      float diff = fit_scale * trial[i] + fit_offset - x[i];
      error += w[i] * (diff * diff);
    }
    if (error < best_error) {
      std::copy(trial, trial + n, levels);
      best_error = error;
      scale = fit_scale;
      offset = fit_offset;
    }
  }
  *neg_offset = -offset;
  return scale;
}

// Signed levels l in [-half, half - 1] with x ≈ scale * l for n values,
// stored as l + half: start from the grid that maps the extreme value to
// -half, try 18 grids around it, and keep the one with the best x^2-weighted
// least-squares fit. Returns the scale (0 for a group of zeros).
float FitSymmetricLevels(int n, int half, const float* x, uint8_t* levels) {
  float extreme = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    float a = std::fabs(x[i]);
    if (a > amax) {
      amax = a;
      extreme = x[i];
    }
  }
  if (amax < kNegligible) {
    std::fill(levels, levels + n, 0);
    return 0.0f;
  }
  auto level = [half](float v) { return std::clamp(NearestInt(v), -half, half - 1); };
  float inv_scale = static_cast<float>(-half) / extreme;
  float sum_lx = 0, sum_l2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = level(inv_scale * x[i]);
    levels[i] = static_cast<uint8_t>(l + half);
    auto lf = static_cast<float>(l);
    float w = x[i] * x[i];
    sum_lx += w * x[i] * lf;
    sum_l2 += w * lf * lf;
  }
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int s = -9; s <= 9; ++s) {
    if (s == 0) continue;
    inv_scale = -(static_cast<float>(half) + 0.1f * static_cast<float>(s)) / extreme;
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      auto lf = static_cast<float>(level(inv_scale * x[i]));
      float w = x[i] * x[i];
      sum_lx += w * x[i] * lf;
      sum_l2 += w * lf * lf;
    }
    // sum_lx^2 / sum_l2 is the error reduction of the refit scale.
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(level(inv_scale * x[i]) + half);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Q4_K/Q5_K's 6-bit sub-block scales and mins in their 12 bytes (the layout
// UnpackScaleMinK4 reads).
void PackScaleMinK4(const uint8_t scale[8], const uint8_t min[8], uint8_t out[kKScaleBytes]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = scale[j];
    out[j + 4] = min[j];
  }
  for (int j = 4; j < 8; ++j) {
    out[j + 4] = static_cast<uint8_t>((scale[j] & 0x0F) | ((min[j] & 0x0F) << 4));
    out[j - 4] = static_cast<uint8_t>(out[j - 4] | ((scale[j] >> 4) << 6));
    out[j] = static_cast<uint8_t>(out[j] | ((min[j] >> 4) << 6));
  }
}

// The shared part of Q4_K and Q5_K for one super-block: fits each sub-block
// of 32, quantizes the scales and mins to 6 bits under d and dmin, and
// requantizes the values against the stored scales. Fills levels (0..max_q).
void QuantizeScaleMinSuperBlock(const float* x, int max_q, float rmin, int steps, HalfBits* d, HalfBits* dmin,
                                uint8_t scales_out[kKScaleBytes], uint8_t levels[kQK_K]) {
  constexpr int kSub = 32;
  float scales[kQK_K / kSub], mins[kQK_K / kSub];
  float weights[kSub];
  uint8_t trial[kSub];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kQK_K / kSub; ++j) {
    const float* xs = x + kSub * j;
    float sum_x2 = 0;
    for (int i = 0; i < kSub; ++i) sum_x2 += xs[i] * xs[i];
    float rms = std::sqrt(sum_x2 / kSub);
    for (int i = 0; i < kSub; ++i) weights[i] = rms + std::fabs(xs[i]);
    scales[j] = FitAffineLevels(kSub, max_q, xs, weights, levels + kSub * j, &mins[j], trial, rmin, 0.1f, steps);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t q_scale[8], q_min[8];
  for (int j = 0; j < kQK_K / kSub; ++j) {
    // As a byte, like ggml: a (never seen) negative fit wraps and then caps at 63.
    q_scale[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    q_min[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
  }
  std::memset(scales_out, 0, kKScaleBytes);
  PackScaleMinK4(q_scale, q_min, scales_out);
  *d = F32ToF16(max_scale / 63.0f);
  *dmin = F32ToF16(max_min / 63.0f);

  const float stored_d = F16ToF32(*d), stored_dmin = F16ToF32(*dmin);
  for (int j = 0; j < kQK_K / kSub; ++j) {
    int sc, m;
    UnpackScaleMinK4(scales_out, j, &sc, &m);
    const float step = stored_d * static_cast<float>(sc);
    if (step == 0) continue;  // keeps the fitted levels, as ggml does
    const float offset = stored_dmin * static_cast<float>(m);
    for (int i = 0; i < kSub; ++i) {
      levels[kSub * j + i] = static_cast<uint8_t>(std::clamp(NearestInt((x[kSub * j + i] + offset) / step), 0, max_q));
    }
  }
}

}  // namespace

void QuantizeQ4_KRef(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    BlockQ4_K block;
    uint8_t levels[kQK_K];
    QuantizeScaleMinSuperBlock(x, 15, -1.0f, 20, &block.d, &block.dmin, block.scales, levels);
    // Each 64-value chunk: 32 bytes, low nibbles its first 32 values.
    for (int chunk = 0; chunk < kQK_K / 64; ++chunk) {
      for (int i = 0; i < 32; ++i) {
        block.qs[32 * chunk + i] =
            static_cast<uint8_t>(levels[64 * chunk + i] | (levels[64 * chunk + 32 + i] << 4));
      }
    }
    StoreBlock(dst, b, block);
  }
}

void QuantizeQ5_KRef(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    BlockQ5_K block;
    uint8_t levels[kQK_K];
    QuantizeScaleMinSuperBlock(x, 31, -0.5f, 15, &block.d, &block.dmin, block.scales, levels);
    // Low 4 bits as Q4_K; the 5th bit of element e in bit e / 32 of qh[e % 32].
    std::memset(block.qh, 0, sizeof(block.qh));
    for (int e = 0; e < kQK_K; ++e) {
      block.qh[e % 32] = static_cast<uint8_t>(block.qh[e % 32] | (((levels[e] >> 4) & 1) << (e / 32)));
    }
    for (int chunk = 0; chunk < kQK_K / 64; ++chunk) {
      for (int i = 0; i < 32; ++i) {
        block.qs[32 * chunk + i] = static_cast<uint8_t>((levels[64 * chunk + i] & 0x0F) |
                                                        ((levels[64 * chunk + 32 + i] & 0x0F) << 4));
      }
    }
    StoreBlock(dst, b, block);
  }
}

void QuantizeQ6_KRef(const float* src, void* dst, int64_t n) {
  constexpr int kSub = 16;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    BlockQ6_K block;
    std::memset(&block, 0, sizeof(block));
    uint8_t levels[kQK_K];
    float scales[kQK_K / kSub];
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < kQK_K / kSub; ++j) {
      scales[j] = FitSymmetricLevels(kSub, 32, x + kSub * j, levels + kSub * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < kNegligible) {
      StoreBlock(dst, b, block);  // all zeros, d = 0
      continue;
    }
    // The largest sub-block scale maps to -128, the sign making d positive
    // for a negative extreme and vice versa.
    float inv_scale = -128.0f / max_scale;
    block.d = F32ToF16(1 / inv_scale);
    for (int j = 0; j < kQK_K / kSub; ++j) {
      block.scales[j] = static_cast<int8_t>(std::min(127, NearestInt(inv_scale * scales[j])));
    }
    const float stored_d = F16ToF32(block.d);
    for (int j = 0; j < kQK_K / kSub; ++j) {
      const float step = stored_d * static_cast<float>(block.scales[j]);
      if (step == 0) continue;  // keeps the fitted levels, as ggml does
      for (int i = 0; i < kSub; ++i) {
        levels[kSub * j + i] = static_cast<uint8_t>(std::clamp(NearestInt(x[kSub * j + i] / step), -32, 31) + 32);
      }
    }
    // Each half of 128 values: 64 bytes of ql, 32 of qh (see DequantizeQ6_K).
    for (int e = 0; e < kQK_K; ++e) {
      int half = e / 128, k = (e % 128) / 32, l = e % 32;
      uint8_t& low = block.ql[half * 64 + (k % 2) * 32 + l];
      low = static_cast<uint8_t>(low | ((levels[e] & 0x0F) << (k < 2 ? 0 : 4)));
      uint8_t& high = block.qh[half * 32 + l];
      high = static_cast<uint8_t>(high | ((levels[e] >> 4) << (2 * k)));
    }
    StoreBlock(dst, b, block);
  }
}

}  // namespace kiln
