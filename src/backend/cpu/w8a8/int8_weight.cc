// Quantizing and packing int8 linear weights.
#include "backend/cpu/w8a8/int8_weight.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "quant/dequantize.h"

namespace kiln::cpu {
namespace {

template <typename T>
T* AllocateZeroed(size_t count) {
  size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (p != nullptr) std::memset(p, 0, bytes == 0 ? 64 : bytes);
  return static_cast<T*>(p);
}

int64_t PackedOffset(int64_t n, int64_t k, int64_t kp) {
  const int64_t panel = n / kInt8PanelRows, r = n % kInt8PanelRows;
  const int64_t group = k / kInt8GroupK, j = k % kInt8GroupK;
  return (panel * (kp / kInt8GroupK) + group) * (kInt8PanelRows * kInt8GroupK) + r * kInt8GroupK + j;
}

}  // namespace

void Int8Weight::FreeAligned::operator()(void* p) const { std::free(p); }

size_t Int8Weight::bytes() const {
  const auto padded_rows = static_cast<size_t>(panels() * kInt8PanelRows);
  return padded_rows * static_cast<size_t>(kp_) + padded_rows * (sizeof(float) + sizeof(int32_t));
}

int8_t Int8Weight::At(int64_t n, int64_t k) const { return data_.get()[PackedOffset(n, k, kp_)]; }

Expected<Int8Weight> PackInt8Weight(DType dtype, const void* w, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return InvalidArgument("int8 weight: shape [{}, {}] is empty", n, k);
  if (k > kInt8MaxK) {
    return Unsupported("int8 weight: {} input features exceed the int8 GEMM's limit of {}", k, kInt8MaxK);
  }
  auto row_bytes = DTypeBytes(dtype, static_cast<uint64_t>(k));
  if (!row_bytes) return InvalidArgument("int8 weight: rows of {} are not whole {} blocks", k, DTypeName(dtype));

  Int8Weight out;
  out.n_ = n;
  out.k_ = k;
  out.kp_ = (k + kInt8GroupK - 1) / kInt8GroupK * kInt8GroupK;
  const auto padded_rows = static_cast<size_t>(out.panels() * kInt8PanelRows);
  out.data_.reset(AllocateZeroed<int8_t>(padded_rows * static_cast<size_t>(out.kp_)));
  out.scales_.reset(AllocateZeroed<float>(padded_rows));
  out.row_sums_.reset(AllocateZeroed<int32_t>(padded_rows));
  if (!out.data_ || !out.scales_ || !out.row_sums_) {
    return ResourceExhausted("int8 weight: cannot allocate {} bytes for [{}, {}]", out.bytes(), n, k);
  }

  std::vector<float> values(static_cast<size_t>(k));
  const auto* src = static_cast<const uint8_t*>(w);
  for (int64_t row = 0; row < n; ++row) {
    KILN_RETURN_IF_ERROR(DequantizeRow(dtype, src + static_cast<uint64_t>(row) * *row_bytes, values.data(), k));
    float amax = 0;
    for (int64_t i = 0; i < k; ++i) {
      if (!std::isfinite(values[static_cast<size_t>(i)])) {
        return InvalidArgument("int8 weight: row {} column {} is not finite", row, i);
      }
      amax = std::max(amax, std::fabs(values[static_cast<size_t>(i)]));
    }
    const float scale = amax / 127.0f;
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      float q = std::nearbyint(values[static_cast<size_t>(i)] * inv);
      auto qi = static_cast<int8_t>(std::max(-127.0f, std::min(127.0f, q)));
      out.data_.get()[PackedOffset(row, i, out.kp_)] = qi;
      sum += qi;
    }
    out.scales_.get()[row] = scale;
    out.row_sums_.get()[row] = sum;
  }
  return out;
}

}  // namespace kiln::cpu
