// Round-to-nearest quantizers for the 32-element block formats, the float
// conversions, and the dispatch over every format kiln writes.
#include "quant/quantize_ref.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/ggml_blocks.h"
#include "quant/quantize_iquants.h"
#include "quant/quantize_kquants.h"

namespace kiln {
namespace {

// The value of largest magnitude, sign kept (the first one on ties).
float SignedExtreme(const float* x) {
  float extreme = 0;
  for (int i = 0; i < kQK; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  }
  return extreme;
}

// Truncation toward zero of a value already known to be non-negative and
// small (ggml's `(int8_t)(v + 0.5f)` rounding, which is floor here).
int FloorSmall(float v) {
  if (!(v >= 0)) return 0;
  if (v > 255) return 255;
  return static_cast<int>(v);
}

// Packs 32 values of 4 (or the low 4 of 5) bits: element i in the low
// nibble of byte i, element i + 16 in the high nibble.
void PackNibbles(const int q[kQK], uint8_t qs[kQK / 2]) {
  for (int i = 0; i < kQK / 2; ++i) qs[i] = static_cast<uint8_t>((q[i] & 0x0F) | ((q[i + kQK / 2] & 0x0F) << 4));
}

// The 5th bits of 32 values, bit i for element i, little-endian.
void PackHighBits(const int q[kQK], uint8_t qh[4]) {
  uint32_t bits = 0;
  for (int i = 0; i < kQK; ++i) bits |= static_cast<uint32_t>((q[i] >> 4) & 1) << i;
  std::memcpy(qh, &bits, 4);
}

// Symmetric blocks: d = extreme / -levels_below_zero, q = floor(x / d + offset + 0.5).
void QuantizeSymmetric(const float* x, int half_range, int max_q, HalfBits* d_out, int q[kQK]) {
  float extreme = SignedExtreme(x);
  float d = extreme / static_cast<float>(-half_range);
  float inv = d != 0 ? 1.0f / d : 0.0f;
  *d_out = F32ToF16(d);
  const float offset = static_cast<float>(half_range) + 0.5f;
  for (int i = 0; i < kQK; ++i) q[i] = std::min(max_q, FloorSmall(x[i] * inv + offset));
}

// Asymmetric blocks: m = min, d = (max - min) / max_q, q = floor((x - m) / d + 0.5).
void QuantizeAffine(const float* x, int max_q, HalfBits* d_out, HalfBits* m_out, int q[kQK]) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int i = 0; i < kQK; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  float d = (hi - lo) / static_cast<float>(max_q);
  float inv = d != 0 ? 1.0f / d : 0.0f;
  *d_out = F32ToF16(d);
  *m_out = F32ToF16(lo);
  for (int i = 0; i < kQK; ++i) q[i] = std::min(max_q, FloorSmall((x[i] - lo) * inv + 0.5f));
}

}  // namespace

void QuantizeQ8_0Ref(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float amax = 0;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    float d = amax / 127.0f;
    float inv = d != 0 ? 1.0f / d : 0.0f;
    BlockQ8_0 block;
    block.d = F32ToF16(d);
    for (int i = 0; i < kQK; ++i) {
      block.qs[i] = static_cast<int8_t>(std::clamp(std::lround(x[i] * inv), -127L, 127L));
    }
    StoreBlock(dst, b, block);
  }
}

void QuantizeQ4_0Ref(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    BlockQ4_0 block;
    int q[kQK];
    QuantizeSymmetric(src + b * kQK, 8, 15, &block.d, q);
    PackNibbles(q, block.qs);
    StoreBlock(dst, b, block);
  }
}

void QuantizeQ4_1Ref(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    BlockQ4_1 block;
    int q[kQK];
    QuantizeAffine(src + b * kQK, 15, &block.d, &block.m, q);
    PackNibbles(q, block.qs);
    StoreBlock(dst, b, block);
  }
}

void QuantizeQ5_0Ref(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    BlockQ5_0 block;
    int q[kQK];
    QuantizeSymmetric(src + b * kQK, 16, 31, &block.d, q);
    PackHighBits(q, block.qh);
    PackNibbles(q, block.qs);
    StoreBlock(dst, b, block);
  }
}

void QuantizeQ5_1Ref(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    BlockQ5_1 block;
    int q[kQK];
    QuantizeAffine(src + b * kQK, 31, &block.d, &block.m, q);
    PackHighBits(q, block.qh);
    PackNibbles(q, block.qs);
    StoreBlock(dst, b, block);
  }
}

bool CanQuantizeTo(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS: return true;
    default: return false;
  }
}

Status QuantizeRowRef(DType dtype, const float* src, void* dst, int64_t n) {
  if (!CanQuantizeTo(dtype)) return Unsupported("quantize: no reference quantizer for {}", DTypeName(dtype));
  if (n < 0 || n % DTypeBlockSize(dtype) != 0) {
    return InvalidArgument("quantize {}: {} elements is not a whole number of blocks", DTypeName(dtype), n);
  }
  auto* out = static_cast<uint8_t*>(dst);
  switch (dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = F32ToF16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = F32ToBf16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      break;
    case DType::kQ8_0: QuantizeQ8_0Ref(src, dst, n); break;
    case DType::kQ4_0: QuantizeQ4_0Ref(src, dst, n); break;
    case DType::kQ4_1: QuantizeQ4_1Ref(src, dst, n); break;
    case DType::kQ5_0: QuantizeQ5_0Ref(src, dst, n); break;
    case DType::kQ5_1: QuantizeQ5_1Ref(src, dst, n); break;
    case DType::kQ4_K: QuantizeQ4_KRef(src, dst, n); break;
    case DType::kQ5_K: QuantizeQ5_KRef(src, dst, n); break;
    case DType::kQ6_K: QuantizeQ6_KRef(src, dst, n); break;
    case DType::kIQ4_NL: QuantizeIQ4_NLRef(src, dst, n); break;
    case DType::kIQ4_XS: QuantizeIQ4_XSRef(src, dst, n); break;
    default: break;  // rejected by CanQuantizeTo above
  }
  return Status::Ok();
}

}  // namespace kiln
