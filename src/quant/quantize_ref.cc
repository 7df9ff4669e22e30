// Round-to-nearest quantizers for Q8_0 and Q4_0 and the float conversions.
#include "quant/quantize_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/ggml_blocks.h"

namespace kiln {

void QuantizeQ8_0Ref(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float amax = 0;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    float d = amax / 127.0f;
    float inv = d != 0 ? 1.0f / d : 0.0f;
    BlockQ8_0 block;
    block.d = F32ToF16(d);
    for (int i = 0; i < kQK; ++i) block.qs[i] = static_cast<int8_t>(std::lround(x[i] * inv));
    std::memcpy(out + b * sizeof(BlockQ8_0), &block, sizeof(block));
  }
}

void QuantizeQ4_0Ref(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float extreme = 0;
    for (int i = 0; i < kQK; ++i) {
      if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
    }
    float d = extreme / -8.0f;
    float inv = d != 0 ? 1.0f / d : 0.0f;
    BlockQ4_0 block;
    block.d = F32ToF16(d);
    for (int i = 0; i < kQK / 2; ++i) {
      auto quantize = [&](float v) {
        return static_cast<uint8_t>(std::clamp<long>(std::lround(v * inv) + 8, 0, 15));
      };
      block.qs[i] = static_cast<uint8_t>(quantize(x[i]) | (quantize(x[i + kQK / 2]) << 4));
    }
    std::memcpy(out + b * sizeof(BlockQ4_0), &block, sizeof(block));
  }
}

Status QuantizeRowRef(DType dtype, const float* src, void* dst, int64_t n) {
  if (n < 0 || n % DTypeBlockSize(dtype) != 0) {
    return InvalidArgument("quantize {}: {} elements is not a whole number of blocks", DTypeName(dtype), n);
  }
  auto* out = static_cast<uint8_t*>(dst);
  switch (dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      return Status::Ok();
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = F32ToF16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return Status::Ok();
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = F32ToBf16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return Status::Ok();
    case DType::kQ8_0: QuantizeQ8_0Ref(src, dst, n); return Status::Ok();
    case DType::kQ4_0: QuantizeQ4_0Ref(src, dst, n); return Status::Ok();
    default: return Unsupported("quantize: no reference quantizer for {}", DTypeName(dtype));
  }
}

}  // namespace kiln
