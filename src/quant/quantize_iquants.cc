// The IQ4 reference quantizers. Unlike the k-quants these are not meant to
// reproduce llama.cpp's bytes (its IQ4 search differs and mostly runs with
// an importance matrix); what is tested is the error they reach and that
// every block decodes to what the format defines.
#include "quant/quantize_iquants.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/ggml_blocks.h"

namespace kiln {
namespace {

// Candidate scales tried either side of the one that maps the group's
// largest magnitude onto the table's end.
constexpr int kScaleSteps = 7;

// The index of the table value nearest v (the lower one on a tie).
uint8_t NearestIndex(float v) {
  if (!(v > kIQ4Values[0])) return 0;  // also NaN, which finite inputs never give
  int lo = 0, hi = 15;
  if (v >= kIQ4Values[15]) return 15;
  while (hi - lo > 1) {  // kIQ4Values[lo] < v < kIQ4Values[hi] after the loop
    const int mid = (lo + hi) / 2;
    if (v < kIQ4Values[mid]) hi = mid; else lo = mid;
  }
  return static_cast<uint8_t>(v - kIQ4Values[lo] <= kIQ4Values[hi] - v ? lo : hi);
}

// Fits x[0..31] ≈ scale * kIQ4Values[q[i]] minimizing sum w (scale v - x)^2:
// for each candidate inverse scale, the nearest indices, then the scale by
// least squares for those indices; keeps the candidate of least error.
// Returns the scale (0 for an all-zero group, whose indices are then 8).
float FitGroup(const float* x, const float* w, uint8_t q[kQK]) {
  float amax = 0, extreme = 0;
  for (int i = 0; i < kQK; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax < 1e-30f) {
    std::memset(q, 8, kQK);
    return 0;
  }
  float best_scale = 0, best_merit = -1;
  uint8_t trial[kQK];
  for (int step = -kScaleSteps; step <= kScaleSteps; ++step) {
    const float inverse = static_cast<float>(kIQ4Values[0] + step) / extreme;
    double sum_xv = 0, sum_vv = 0;
    for (int i = 0; i < kQK; ++i) {
      trial[i] = NearestIndex(inverse * x[i]);
      const double v = kIQ4Values[trial[i]];
      sum_xv += static_cast<double>(w[i]) * x[i] * v;
      sum_vv += static_cast<double>(w[i]) * v * v;
    }
    // The least-squares error is sum w x^2 - sum_xv^2 / sum_vv: the larger
    // sum_xv^2 / sum_vv, the smaller the error.
    if (sum_vv <= 0) continue;
    const double merit = sum_xv * sum_xv / sum_vv;
    if (merit > best_merit) {
      best_merit = merit;
      best_scale = static_cast<float>(sum_xv / sum_vv);
      std::memcpy(q, trial, kQK);
    }
  }
  return best_scale;
}

// Weights of the fit: each value's square plus the mean square of its
// block, so that large values count most without small ones counting nothing.
void FitWeights(const float* x, int n, float* w) {
  double sum_sq = 0;
  for (int i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const auto mean_sq = static_cast<float>(sum_sq / n);
  for (int i = 0; i < n; ++i) w[i] = mean_sq + x[i] * x[i];
}

void PackIndices(const uint8_t q[kQK], uint8_t qs[kQK / 2]) {
  for (int i = 0; i < kQK / 2; ++i) qs[i] = static_cast<uint8_t>(q[i] | (q[i + kQK / 2] << 4));
}

}  // namespace

void QuantizeIQ4_NLRef(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  float w[kQK];
  uint8_t q[kQK];
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    FitWeights(x, kQK, w);
    BlockIQ4_NL block;
    block.d = F32ToF16(FitGroup(x, w, q));
    PackIndices(q, block.qs);
    std::memcpy(out + b * sizeof(BlockIQ4_NL), &block, sizeof(block));
  }
}

void QuantizeIQ4_XSRef(const float* src, void* dst, int64_t n) {
  constexpr int kGroups = kQK_K / kQK;
  auto* out = static_cast<uint8_t*>(dst);
  float w[kQK_K];
  uint8_t q[kQK_K];
  float scales[kGroups];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    FitWeights(x, kQK_K, w);
    float extreme = 0;
    for (int j = 0; j < kGroups; ++j) {
      scales[j] = FitGroup(x + kQK * j, w + kQK * j, q + kQK * j);
      if (std::fabs(scales[j]) > std::fabs(extreme)) extreme = scales[j];
    }
    BlockIQ4_XS block{};
    // The largest sub-scale becomes -32 steps of d (the 6-bit range is
    // -32..31), keeping its sign in d.
    block.d = F32ToF16(-extreme / 32.0f);
    const float d = F16ToF32(block.d);
    for (int j = 0; j < kGroups; ++j) {
      int steps = 0;
      if (d != 0) steps = static_cast<int>(std::nearbyint(scales[j] / d));
      steps = steps < -32 ? -32 : (steps > 31 ? 31 : steps);
      const float dl = d * static_cast<float>(steps);
      uint8_t* group = q + kQK * j;
      if (dl != 0) {
        const float inverse = 1.0f / dl;
        for (int i = 0; i < kQK; ++i) group[i] = NearestIndex(inverse * x[kQK * j + i]);
      } else {
        std::memset(group, 8, kQK);
      }
      const int ls = steps + 32;
      block.scales_l[j / 2] = static_cast<uint8_t>(block.scales_l[j / 2] | ((ls & 0x0F) << (4 * (j % 2))));
      block.scales_h = static_cast<uint16_t>(block.scales_h | ((ls >> 4) << (2 * j)));
      PackIndices(group, block.qs + 16 * j);
    }
    std::memcpy(out + b * sizeof(BlockIQ4_XS), &block, sizeof(block));
  }
}

}  // namespace kiln
