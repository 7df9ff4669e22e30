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

// Where a k-quant block's f16 d and dmin sit (dmin < 0: none), and its body:
// every other byte, which the x8 tile holds in 4-byte pieces.
struct SuperBlockParts {
  int64_t d, dmin, body, body_bytes;
};
static_assert(offsetof(BlockQ4_K, qs) + sizeof(BlockQ4_K::qs) == sizeof(BlockQ4_K));
static_assert(offsetof(BlockQ5_K, qs) + sizeof(BlockQ5_K::qs) == sizeof(BlockQ5_K));
static_assert(offsetof(BlockQ6_K, d) + 2 == sizeof(BlockQ6_K));
static_assert(offsetof(BlockQ3_K, d) + 2 == sizeof(BlockQ3_K));
static_assert(offsetof(BlockQ2_K, dmin) + 2 == sizeof(BlockQ2_K));
static_assert(offsetof(BlockIQ4_XS, scales_l) == 4 && offsetof(BlockIQ4_XS, qs) + 128 == sizeof(BlockIQ4_XS));

bool IsSuperX8(DType dtype) {
  return dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kQ6_K || dtype == DType::kQ3_K ||
         dtype == DType::kQ2_K || dtype == DType::kIQ4_XS;
}

SuperBlockParts PartsOf(DType dtype) {
  switch (dtype) {
    case DType::kQ4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin), offsetof(BlockQ4_K, scales), sizeof(BlockQ4_K) - 4};
    case DType::kQ5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin), offsetof(BlockQ5_K, scales), sizeof(BlockQ5_K) - 4};
    case DType::kQ3_K: return {offsetof(BlockQ3_K, d), -1, offsetof(BlockQ3_K, hmask), sizeof(BlockQ3_K) - 2};
    case DType::kQ2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin), offsetof(BlockQ2_K, scales), sizeof(BlockQ2_K) - 4};
    // IQ4_XS's 16 bits of high scale bits go where dmin goes.
    case DType::kIQ4_XS:
      return {offsetof(BlockIQ4_XS, d), offsetof(BlockIQ4_XS, scales_h), offsetof(BlockIQ4_XS, scales_l),
              sizeof(BlockIQ4_XS) - 4};
    default: return {offsetof(BlockQ6_K, d), -1, offsetof(BlockQ6_K, ql), sizeof(BlockQ6_K) - 2};
  }
}

// Where a 32-value block's parts sit: its f16 d, its f16 m (< 0: none),
// its 16 nibble bytes and its 4 bytes of fifth bits (< 0: none).
struct BlockParts {
  int64_t d, m, nibbles, fifth;
};

BlockParts PartsOf32(DType dtype) {
  static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0));  // IQ4_NL moves as Q4_0
  switch (dtype) {
    case DType::kQ8_0: return {offsetof(BlockQ8_0, d), -1, offsetof(BlockQ8_0, qs), -1};
    case DType::kQ5_0: return {offsetof(BlockQ5_0, d), -1, offsetof(BlockQ5_0, qs), offsetof(BlockQ5_0, qh)};
    case DType::kQ4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m), offsetof(BlockQ4_1, qs), -1};
    case DType::kQ5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m), offsetof(BlockQ5_1, qs), offsetof(BlockQ5_1, qh)};
    default: return {offsetof(BlockQ4_0, d), -1, offsetof(BlockQ4_0, qs), -1};
  }
}

// Moves rows [16p, 16p + 16) of w (those below N) into pair p of the x8
// layout at `pair`, which is zero-filled: each row's block in 4-byte pieces,
// one per tile line.
void RepackPair(const QuantMatrix& w, int64_t p, uint8_t* pair) {
  const int64_t blocks = w.cols() / kQK;
  const int64_t stride = X8ScaleStride(w.dtype());
  uint8_t* quants = pair + X8ScaleBytes(w.dtype(), blocks);
  const int64_t tile = X8TileBytes(w.dtype());
  const int64_t block_bytes = GetDTypeInfo(w.dtype()).block_bytes;
  const BlockParts parts = PartsOf32(w.dtype());
  const int lines = w.dtype() == DType::kQ8_0 ? 8 : 4;
  for (int j = 0; j < kX8PairRows; ++j) {
    const int64_t n = p * kX8PairRows + j;
    if (n >= w.rows()) break;
    const uint8_t* row = w.data() + n * w.row_bytes();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = row + b * block_bytes;
      std::memcpy(pair + b * stride + 2 * j, block + parts.d, 2);
      if (parts.m >= 0) std::memcpy(pair + b * stride + 32 + 2 * j, block + parts.m, 2);
      uint8_t* dst = quants + b * tile + 4 * j;
      for (int l = 0; l < lines; ++l) std::memcpy(dst + 64 * l, block + parts.nibbles + 4 * l, 4);
      if (parts.fifth >= 0) std::memcpy(dst + 64 * lines, block + parts.fifth, 4);
    }
  }
}

// Q6_K value e (0..255), 6 bits, as the row kernel unpacks it.
int SixBitValue(const BlockQ6_K& b, int e) {
  const int h = e / 128, c = e % 128 / 32, l = e % 32;
  const uint8_t low = b.ql[64 * h + 32 * (c % 2) + l];
  const int nibble = c < 2 ? low & 0x0F : low >> 4;
  return nibble | (((b.qh[32 * h + l] >> (2 * c)) & 3) << 4);
}

// A Q6_K block's values and scales into one row's dwords of a tile (row
// j's at dst + 4 j + 64 l): value group i = 8h + j' (h, j' < 8) on lines 3i
// .. 3i+2, byte p of line 3i + t holding value 128h + 32t + 4j' + p in bits
// 0-5 and bits 2t, 2t+1 of value 128h + 96 + 4j' + p in bits 6-7; the 16
// int8 scales on lines 48-51 as in the file.
void RepackQ6_KValues(const uint8_t* block, uint8_t* dst) {
  BlockQ6_K b;
  std::memcpy(&b, block, sizeof(b));
  for (int h = 0; h < 2; ++h) {
    for (int g = 0; g < 8; ++g) {
      for (int t = 0; t < 3; ++t) {
        uint8_t* line = dst + 64 * (3 * (8 * h + g) + t);
        for (int p = 0; p < 4; ++p) {
          const int e = 128 * h + 4 * g + p;
          const int fourth = SixBitValue(b, e + 96);
          line[p] = static_cast<uint8_t>(SixBitValue(b, e + 32 * t) | (((fourth >> (2 * t)) & 3) << 6));
        }
      }
    }
  }
  for (int l = 0; l < 4; ++l) std::memcpy(dst + 64 * (48 + l), b.scales + 4 * l, 4);
}

// Q3_K value e (0..255), 3 bits (its 2 bits and high bit; the row kernel
// subtracts 4), as the row kernel unpacks it.
int ThreeBitValue(const BlockQ3_K& b, int e) {
  const int h = e / 128, g = e % 128 / 32, l = e % 32;
  const int low = (b.qs[32 * h + l] >> (2 * g)) & 3;
  return low | (((b.hmask[l] >> (4 * h + g)) & 1) << 2);
}

// A Q3_K block's values and scales into one row's dwords of a tile (row
// j's at dst + 4 j + 64 l), as quant_matrix.h says: three lines per h < 2
// and i < 4, eight 3-bit values in each byte p's three; the 12 scale bytes
// on lines 24-26 as in the file.
void RepackQ3_KValues(const uint8_t* block, uint8_t* dst) {
  BlockQ3_K b;
  std::memcpy(&b, block, sizeof(b));
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      uint8_t* line = dst + 64 * 3 * (4 * h + i);
      for (int p = 0; p < 4; ++p) {
        auto v = [&](int g, int j) { return ThreeBitValue(b, 128 * h + 32 * g + 4 * j + p); };
        const int c1 = v(3, 2 * i), c2 = v(3, 2 * i + 1);
        line[p] = static_cast<uint8_t>(v(0, 2 * i) | (v(0, 2 * i + 1) << 3) | ((c1 & 3) << 6));
        line[64 + p] = static_cast<uint8_t>(v(1, 2 * i) | (v(1, 2 * i + 1) << 3) | ((c1 >> 2) << 6) | ((c2 & 1) << 7));
        line[128 + p] = static_cast<uint8_t>(v(2, 2 * i) | (v(2, 2 * i + 1) << 3) | ((c2 >> 1) << 6));
      }
    }
  }
  for (int l = 0; l < 3; ++l) std::memcpy(dst + 64 * (24 + l), b.scales + 4 * l, 4);
}

// RepackPair for the k-quants: d (and dmin) to the scales area, the body's
// 4-byte pieces to the lines of the super-block's tile.
void RepackSuperPair(const QuantMatrix& w, int64_t p, uint8_t* pair) {
  const int64_t blocks = w.cols() / kQK_K;
  const int64_t stride = X8ScaleStride(w.dtype());
  uint8_t* quants = pair + X8ScaleBytes(w.dtype(), blocks);
  const int64_t tile = X8TileBytes(w.dtype());
  const int64_t block_bytes = GetDTypeInfo(w.dtype()).block_bytes;
  const SuperBlockParts parts = PartsOf(w.dtype());
  for (int j = 0; j < kX8PairRows; ++j) {
    const int64_t n = p * kX8PairRows + j;
    if (n >= w.rows()) break;
    const uint8_t* row = w.data() + n * w.row_bytes();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = row + b * block_bytes;
      std::memcpy(pair + b * stride + 2 * j, block + parts.d, 2);
      if (parts.dmin >= 0) std::memcpy(pair + b * stride + 32 + 2 * j, block + parts.dmin, 2);
      uint8_t* dst = quants + b * tile + 4 * j;
      if (w.dtype() == DType::kQ6_K) {
        RepackQ6_KValues(block, dst);
        continue;
      }
      if (w.dtype() == DType::kQ3_K) {
        RepackQ3_KValues(block, dst);
        continue;
      }
      for (int64_t l = 0; l < parts.body_bytes / 4; ++l) std::memcpy(dst + 64 * l, block + parts.body + 4 * l, 4);
    }
  }
}

}  // namespace

bool HasX8Layout(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kIQ4_NL || dtype == DType::kQ5_0 ||
         dtype == DType::kQ4_1 || dtype == DType::kQ5_1 || IsSuperX8(dtype);
}

bool X8ServesEveryRowCount(DType dtype) {
  return HasX8Layout(dtype);
}

int64_t X8ScaleStride(DType dtype) {
  const bool two_scales = dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kQ2_K ||
                          dtype == DType::kQ4_1 || dtype == DType::kQ5_1 || dtype == DType::kIQ4_XS;
  return two_scales ? 64 : 32;
}

int64_t X8ScaleBytes(DType dtype, int64_t blocks) { return (blocks * X8ScaleStride(dtype) + 63) / 64 * 64; }

int64_t X8TileBytes(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return 512;
    case DType::kQ5_0:
    case DType::kQ5_1: return 320;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return 16 * PartsOf(dtype).body_bytes;
    default: return 256;
  }
}

int64_t X8PairBytes(DType dtype, int64_t k) {
  const int64_t blocks = k / DTypeBlockSize(dtype);
  return X8ScaleBytes(dtype, blocks) + blocks * X8TileBytes(dtype);
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
    for (int64_t p = begin; p < end; ++p) {
      if (IsSuperX8(w.dtype())) {
        RepackSuperPair(w, p, base + p * pair_bytes);
      } else {
        RepackPair(w, p, base + p * pair_bytes);
      }
    }
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

Expected<QuantMatrix> AdoptX8(const QuantMatrix& w, DomainBuffer x8) {
  if (!HasX8Layout(w.dtype())) return Unsupported("{} has no x8 layout", DTypeName(w.dtype()));
  const int64_t pairs = (w.rows() + kX8PairRows - 1) / kX8PairRows;
  const auto expected = static_cast<size_t>(pairs * X8PairBytes(w.dtype(), w.cols()));
  if (x8.size() != expected) {
    return Corrupt("x8 copy of a [{}, {}] {} matrix: {} bytes, expected {}", w.rows(), w.cols(),
                   DTypeName(w.dtype()), x8.size(), expected);
  }
  QuantMatrix out = w;
  out.x8_ = std::make_shared<const DomainBuffer>(std::move(x8));
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
