// Packing linear weights into 16-row panels.
#include "backend/cpu/kernels/packed_weight.h"

#include <algorithm>

#include "backend/cpu/kernels/weight_memory.h"
#include "core/half.h"

namespace kiln::cpu {
namespace {

// Scatters rows [row_begin, row_end) of row-major W into the panels,
// reading the source sequentially.
template <typename T>
void ScatterRows(DType dtype, const T* src, int64_t row_begin, int64_t row_end, int64_t k, T* dst) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    const T* src_row = src + row * k;
    T* dst_column0 = dst + PackedWeight::Offset(dtype, row, 0, k);
    for (int64_t col = 0; col < k; ++col) dst_column0[col * kPanelWidth] = src_row[col];
  }
}

}  // namespace

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

Expected<PackedWeight> PackLinearWeight(DType dtype, const void* w, int64_t n, int64_t k, ThreadPool* pool) {
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
  auto memory = AllocateWeightMemory(static_cast<size_t>(bytes));
  if (!memory.ok()) return memory.status().WithContext("linear weight");
  void* buffer = memory->data();  // zero-filled: rows past N stay zero

  PackedWeight packed;
  packed.dtype_ = dtype;
  packed.n_ = n;
  packed.k_ = k;
  packed.bytes_ = static_cast<size_t>(bytes);
  packed.data_ = std::move(*memory);
  auto scatter = [&](int64_t panel_begin, int64_t panel_end, int) {
    const int64_t begin = panel_begin * kPanelWidth, end = std::min(n, panel_end * kPanelWidth);
    if (dtype == DType::kF32) {
      ScatterRows(dtype, static_cast<const float*>(w), begin, end, k, static_cast<float*>(buffer));
    } else {
      ScatterRows(dtype, static_cast<const uint16_t*>(w), begin, end, k, static_cast<uint16_t*>(buffer));
    }
  };
  // Packing is bound by page faults and memory: a second thread pays off
  // from a few hundred KB.
  const int64_t panel_bytes = kPanelWidth * k * static_cast<int64_t>(element);
  if (pool != nullptr) {
    pool->ParallelFor(panels, std::max<int64_t>(1, (256 << 10) / panel_bytes), scatter);
  } else {
    scatter(0, panels, 0);
  }
  return packed;
}

Expected<PackedWeight> AdoptPackedLinearWeight(DType dtype, int64_t n, int64_t k, DomainBuffer panels) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return Unsupported("packed linear weight: dtype {}", DTypeName(dtype));
  }
  const uint64_t element = dtype == DType::kF32 ? 4 : 2;
  const uint64_t expected = static_cast<uint64_t>((n + kPanelWidth - 1) / kPanelWidth) * kPanelWidth *
                            static_cast<uint64_t>(k) * element;
  if (n <= 0 || k <= 0 || panels.size() != expected) {
    return Corrupt("packed linear weight: {} bytes for a [{}, {}] {} matrix, expected {}", panels.size(), n, k,
                   DTypeName(dtype), expected);
  }
  if (reinterpret_cast<uintptr_t>(panels.data()) % 64 != 0) {
    return Corrupt("packed linear weight: not 64-byte aligned");
  }
  PackedWeight packed;
  packed.dtype_ = dtype;
  packed.n_ = n;
  packed.k_ = k;
  packed.bytes_ = panels.size();
  packed.data_ = std::move(panels);
  return packed;
}

}  // namespace kiln::cpu
