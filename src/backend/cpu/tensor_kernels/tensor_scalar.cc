// Scalars in element encodings.
#include "backend/cpu/tensor_kernels/tensor_scalar.h"

#include <cstring>

#include "core/half.h"

namespace kiln::cpu {
namespace {

template <typename T>
void Put(T v, uint8_t* out) {
  std::memcpy(out, &v, sizeof(T));
}

}  // namespace

void EncodeScalar(DType dtype, double value, uint8_t* out) {
  switch (dtype) {
    case DType::kF32: Put(static_cast<float>(value), out); break;
    case DType::kF64: Put(value, out); break;
    case DType::kF16: Put(F32ToF16(static_cast<float>(value)), out); break;
    case DType::kBF16: Put(F32ToBf16(static_cast<float>(value)), out); break;
    case DType::kI64: Put(static_cast<int64_t>(value), out); break;
    case DType::kI32: Put(static_cast<int32_t>(value), out); break;
    case DType::kI16: Put(static_cast<int16_t>(value), out); break;
    case DType::kI8: Put(static_cast<int8_t>(value), out); break;
    case DType::kU8: Put(static_cast<uint8_t>(value), out); break;
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

}  // namespace kiln::cpu
