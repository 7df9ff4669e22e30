// Checking block-quantized weights for the quantized kernels, and their
// repacking into the x8 layout.
#include "backend/cpu/qkernels/quant_matrix.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/kernels/weight_memory.h"
#include "quant/dequantize.h"
#include "quant/ggml_blocks.h"

namespace kiln::cpu {

const std::vector<DType>& QuantKernelTypes() {
  static const std::vector<DType> types = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                                           DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                                           DType::kIQ4_NL, DType::kIQ4_XS, DType::kIQ2_XXS, DType::kIQ2_XS,
                                           DType::kIQ2_S,  DType::kIQ3_XXS, DType::kIQ3_S};
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
    case DType::kIQ4_NL: return &DequantizeIQ4_NL;
    case DType::kIQ4_XS: return &DequantizeIQ4_XS;
    case DType::kIQ2_XXS: return &DequantizeIQ2_XXS;
    case DType::kIQ2_XS: return &DequantizeIQ2_XS;
    case DType::kIQ2_S: return &DequantizeIQ2_S;
    case DType::kIQ3_XXS: return &DequantizeIQ3_XXS;
    case DType::kIQ3_S: return &DequantizeIQ3_S;
    default: return nullptr;
  }
}

namespace {

// Moves rows [16p, 16p + 16) of w (those below N) into pair p of the x8
// layout at `pair`, which is zero-filled: each row's block in 4-byte pieces,
// one per tile line.
void RepackPair(const QuantMatrix& w, int64_t p, uint8_t* pair) {
  const int64_t blocks = w.cols() / kQK;
  uint8_t* scales = pair;
  uint8_t* quants = pair + X8ScaleBytes(blocks);
  const bool q8 = w.dtype() == DType::kQ8_0;
  const bool q5 = w.dtype() == DType::kQ5_0;
  const int64_t tile = X8TileBytes(w.dtype());
  static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0));  // IQ4_NL moves as Q4_0
  const int64_t block_bytes = GetDTypeInfo(w.dtype()).block_bytes;
  // Every block starts with its f16 d; the values (nibbles) follow, after
  // Q5_0's fifth bits.
  const int64_t values = q5 ? offsetof(BlockQ5_0, qs) : 2;
  const int lines = q8 ? 8 : 4;
  for (int j = 0; j < kX8PairRows; ++j) {
    const int64_t n = p * kX8PairRows + j;
    if (n >= w.rows()) break;
    const uint8_t* row = w.data() + n * w.row_bytes();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = row + b * block_bytes;
      std::memcpy(scales + b * 32 + 2 * j, block, 2);
      uint8_t* dst = quants + b * tile + 4 * j;
      for (int l = 0; l < lines; ++l) std::memcpy(dst + 64 * l, block + values + 4 * l, 4);
      if (q5) std::memcpy(dst + 64 * lines, block + offsetof(BlockQ5_0, qh), 4);
    }
  }
}

}  // namespace

bool HasX8Layout(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kIQ4_NL || dtype == DType::kQ5_0;
}

int64_t X8ScaleBytes(int64_t blocks) { return (blocks * 32 + 63) / 64 * 64; }

int64_t X8TileBytes(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return 512;
    case DType::kQ5_0: return 320;
    default: return 256;
  }
}

int64_t X8PairBytes(DType dtype, int64_t k) {
  const int64_t blocks = k / kQK;
  return X8ScaleBytes(blocks) + blocks * X8TileBytes(dtype);
}

std::string QuantMatrix::layout() const {
  return fmt::format("{}-{}", DTypeName(dtype_), x8_ != nullptr ? "x8" : "rows");
}

Expected<QuantMatrix> RepackX8(const QuantMatrix& w, ThreadPool* pool) {
  if (!HasX8Layout(w.dtype()) || w.x8_ != nullptr) return w;
  const int64_t pairs = (w.rows() + kX8PairRows - 1) / kX8PairRows;
  const int64_t pair_bytes = X8PairBytes(w.dtype(), w.cols());
  auto memory = AllocateWeightMemory(static_cast<size_t>(pairs * pair_bytes));
  if (!memory.ok()) return memory.status().WithContext(fmt::format("repacking a {} matrix", DTypeName(w.dtype())));
  uint8_t* base = memory->data();
  auto repack = [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p) RepackPair(w, p, base + p * pair_bytes);
  };
  // Copying is bound by page faults and memory: worth a second thread only
  // for matrices of a few hundred KB and more.
  if (pool != nullptr) {
    pool->ParallelFor(pairs, std::max<int64_t>(1, (256 << 10) / pair_bytes), repack);
  } else {
    repack(0, pairs, 0);
  }
  QuantMatrix out = w;
  out.x8_ = std::make_shared<const DomainBuffer>(std::move(*memory));
  return out;
}

Expected<QuantMatrix> MakeQuantMatrix(DType dtype, const void* data, uint64_t nbytes, int64_t n, int64_t k) {
  if (!IsQuantKernelType(dtype)) {
    return Unsupported("quantized linear weight: dtype {} (the CPU quantized kernels take q4_0, q4_1, q5_0, "
                       "q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, iq2_xxs, iq2_xs, iq2_s, "
                       "iq3_xxs and iq3_s)",
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
