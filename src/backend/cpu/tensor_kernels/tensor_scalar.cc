// Scalars in element encodings.
#include "backend/cpu/tensor_kernels/tensor_scalar.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"

namespace kiln::cpu::shape_kernels {
namespace {

template <typename T>
void Put(T v, uint8_t* out) {
  std::memcpy(out, &v, sizeof(T));
}

// value converted to the integer type T, saturating (a plain cast of an
// out-of-range double is undefined).
template <typename T>
T ToInt(double value) {
  if (std::isnan(value)) return 0;
  const auto lo = static_cast<double>(std::numeric_limits<T>::min());
  const auto hi = static_cast<double>(std::numeric_limits<T>::max());
  if (value <= lo) return std::numeric_limits<T>::min();
  if (value >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(value);
}

}  // namespace

void EncodeScalar(DType dtype, double value, uint8_t* out) {
  switch (dtype) {
    case DType::kF32: Put(static_cast<float>(value), out); break;
    case DType::kF64: Put(value, out); break;
    case DType::kF16: Put(F32ToF16(static_cast<float>(value)), out); break;
    case DType::kBF16: Put(F32ToBf16(static_cast<float>(value)), out); break;
    case DType::kI64: Put(ToInt<int64_t>(value), out); break;
    case DType::kI32: Put(ToInt<int32_t>(value), out); break;
    case DType::kI16: Put(ToInt<int16_t>(value), out); break;
    case DType::kI8: Put(ToInt<int8_t>(value), out); break;
    case DType::kU8: Put(ToInt<uint8_t>(value), out); break;
    case DType::kBool: Put(static_cast<uint8_t>(value != 0 ? 1 : 0), out); break;
    default: break;
  }
}

void FillElements(uint8_t* dst, const uint8_t* value, size_t elem_bytes, int64_t n) {
  if (n <= 0) return;
  bool all_zero = true;
  for (size_t i = 0; i < elem_bytes; ++i) all_zero = all_zero && value[i] == 0;
  const size_t total = static_cast<size_t>(n) * elem_bytes;
  if (all_zero || elem_bytes == 1) {
    std::memset(dst, value[0], total);
    return;
  }
  std::memcpy(dst, value, elem_bytes);
  // Doubling copies: log2(n) memcpy calls.
  size_t done = elem_bytes;
  while (done < total) {
    const size_t step = done < total - done ? done : total - done;
    std::memcpy(dst + done, dst, step);
    done += step;
  }
}

}  // namespace kiln::cpu::shape_kernels
