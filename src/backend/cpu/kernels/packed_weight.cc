// Packing linear weights into 16-row panels.
#include "backend/cpu/kernels/packed_weight.h"

#include <cstdlib>
#include <cstring>

#include "core/half.h"

namespace kiln::cpu {
namespace {

// Scatters row-major W into the panels, reading the source sequentially.
template <typename T>
void ScatterRows(DType dtype, const T* src, int64_t n, int64_t k, T* dst) {
  for (int64_t row = 0; row < n; ++row) {
    const T* src_row = src + row * k;
    T* dst_column0 = dst + PackedWeight::Offset(dtype, row, 0, k);
    for (int64_t col = 0; col < k; ++col) dst_column0[col * kPanelWidth] = src_row[col];
  }
}

}  // namespace

void PackedWeight::FreeAligned::operator()(void* p) const {
  std::free(p);
}

ElemType ElemTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF16: return ElemType::kF16;
    case DType::kBF16: return ElemType::kBF16;
    default: return ElemType::kF32;
  }
}

int64_t PackedWeight::Offset(DType dtype, int64_t n, int64_t k, int64_t cols) {
  const int64_t panel = n / kPanelWidth;
  int64_t j = n % kPanelWidth;
  if (dtype == DType::kBF16) j = j < 8 ? 2 * j : 2 * (j - 8) + 1;
  return (panel * cols + k) * kPanelWidth + j;
}

float PackedWeight::At(int64_t n, int64_t k) const {
  const int64_t i = Offset(dtype_, n, k, k_);
  switch (dtype_) {
    case DType::kF16: return F16ToF32(static_cast<const uint16_t*>(data())[i]);
    case DType::kBF16: return Bf16ToF32(static_cast<const uint16_t*>(data())[i]);
    default: return static_cast<const float*>(data())[i];
  }
}

Expected<PackedWeight> PackLinearWeight(DType dtype, const void* w, int64_t n, int64_t k) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return Unsupported("linear weight: dtype {} (the CPU linear kernel takes f32, f16 or bf16)",
                       DTypeName(dtype));
  }
  if (n <= 0 || k <= 0) return InvalidArgument("linear weight: shape [{}, {}] is empty", n, k);
  const size_t element = dtype == DType::kF32 ? 4 : 2;
  const int64_t panels = (n + kPanelWidth - 1) / kPanelWidth;
  uint64_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(panels) * kPanelWidth, static_cast<uint64_t>(k),
                             &elements) ||
      __builtin_mul_overflow(elements, element, &bytes) || bytes > (uint64_t{1} << 48)) {
    return InvalidArgument("linear weight: shape [{}, {}] is too large", n, k);
  }
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* buffer = std::aligned_alloc(64, rounded);
  if (buffer == nullptr) return ResourceExhausted("linear weight: cannot allocate {} bytes", rounded);
  std::memset(buffer, 0, rounded);

  PackedWeight packed;
  packed.dtype_ = dtype;
  packed.n_ = n;
  packed.k_ = k;
  packed.bytes_ = static_cast<size_t>(bytes);
  packed.data_.reset(buffer);
  if (dtype == DType::kF32) {
    ScatterRows(dtype, static_cast<const float*>(w), n, k, static_cast<float*>(buffer));
  } else {
    ScatterRows(dtype, static_cast<const uint16_t*>(w), n, k, static_cast<uint16_t*>(buffer));
  }
  return packed;
}

}  // namespace kiln::cpu
