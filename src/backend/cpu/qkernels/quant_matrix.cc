// Checking block-quantized weights for the quantized kernels.
#include "backend/cpu/qkernels/quant_matrix.h"

#include <algorithm>

#include "quant/dequantize.h"

namespace kiln::cpu {

const std::vector<DType>& QuantKernelTypes() {
  static const std::vector<DType> types = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                                           DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  return types;
}

bool IsQuantKernelType(DType dtype) {
  const auto& types = QuantKernelTypes();
  return std::find(types.begin(), types.end(), dtype) != types.end();
}

int QuantActivationBlock(DType dtype) { return DTypeBlockSize(dtype) == 256 ? 256 : 32; }

RowDequantizer QuantRowDequantizer(DType dtype) {
  switch (dtype) {
    case DType::kQ4_0: return &DequantizeQ4_0;
    case DType::kQ4_1: return &DequantizeQ4_1;
    case DType::kQ5_0: return &DequantizeQ5_0;
    case DType::kQ5_1: return &DequantizeQ5_1;
    case DType::kQ8_0: return &DequantizeQ8_0;
    case DType::kQ8_1: return &DequantizeQ8_1;
    case DType::kQ2_K: return &DequantizeQ2_K;
    case DType::kQ3_K: return &DequantizeQ3_K;
    case DType::kQ4_K: return &DequantizeQ4_K;
    case DType::kQ5_K: return &DequantizeQ5_K;
    case DType::kQ6_K: return &DequantizeQ6_K;
    case DType::kQ8_K: return &DequantizeQ8_K;
    default: return nullptr;
  }
}

Expected<QuantMatrix> MakeQuantMatrix(DType dtype, const void* data, uint64_t nbytes, int64_t n, int64_t k) {
  if (!IsQuantKernelType(dtype)) {
    return Unsupported("quantized linear weight: dtype {} (the CPU quantized kernels take q4_0, q4_1, q5_0, "
                       "q5_1, q8_0, q2_k, q3_k, q4_k, q5_k and q6_k)",
                       DTypeName(dtype));
  }
  if (n <= 0 || k <= 0) return InvalidArgument("quantized weight: shape [{}, {}] is empty", n, k);
  const int block = DTypeBlockSize(dtype);
  if (k % block != 0) {
    return Unsupported("quantized weight: rows of {} values are not a whole number of {} blocks of {}", k,
                       DTypeName(dtype), block);
  }
  auto row_bytes = DTypeBytes(dtype, static_cast<uint64_t>(k));
  uint64_t total = 0;
  if (!row_bytes || __builtin_mul_overflow(*row_bytes, static_cast<uint64_t>(n), &total)) {
    return InvalidArgument("quantized weight: shape [{}, {}] is too large", n, k);
  }
  if (total != nbytes) {
    return Corrupt("quantized weight: {} bytes for a [{}, {}] {} matrix, expected {}", nbytes, n, k,
                   DTypeName(dtype), total);
  }
  if (data == nullptr) return InvalidArgument("quantized weight: no data");
  QuantMatrix m;
  m.dtype_ = dtype;
  m.data_ = static_cast<const uint8_t*>(data);
  m.n_ = n;
  m.k_ = k;
  m.row_bytes_ = static_cast<int64_t>(*row_bytes);
  return m;
}

}  // namespace kiln::cpu
