// Embedding lookup: ids checked first, then rows converted in parallel.
#include "backend/cpu/kernels/embedding.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {
namespace {

Status CheckIds(const int32_t* ids, int64_t count, int64_t vocab) {
  for (int64_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return OutOfRange("embedding: token {} has id {}, outside the vocabulary [0, {})", i, ids[i], vocab);
    }
  }
  return Status::Ok();
}

}  // namespace

Status Embedding(const KernelContext& ctx, DType table_type, const void* table, int64_t vocab, int64_t dim,
                 const int32_t* ids, int64_t count, float* out, int64_t ld_out) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  void (*convert)(const ConvertArgs&) = nullptr;
  size_t element = 2;
  switch (table_type) {
    case DType::kF32: element = 4; break;
    case DType::kF16: convert = kernels.f16_to_f32; break;
    case DType::kBF16: convert = kernels.bf16_to_f32; break;
    default: return Unsupported("embedding: table dtype {} (f32, f16 or bf16 here)", DTypeName(table_type));
  }
  KILN_RETURN_IF_ERROR(CheckIds(ids, count, vocab));
  const size_t row_bytes = static_cast<size_t>(dim) * element;
  ParallelRanges(ctx, count, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)),
                 [&](int64_t begin, int64_t end, int) {
                   for (int64_t i = begin; i < end; ++i) {
                     const void* row =
                         static_cast<const uint8_t*>(table) + static_cast<size_t>(ids[i]) * row_bytes;
                     if (convert == nullptr) {
                       std::memcpy(out + i * ld_out, row, row_bytes);
                     } else {
                       convert(ConvertArgs{row, dim, out + i * ld_out, dim, 1, dim});
                     }
                   }
                 });
  return Status::Ok();
}

Status EmbeddingWith(const KernelContext& ctx, RowDequantizer dequantize, const void* table,
                     int64_t row_bytes, int64_t vocab, int64_t dim, const int32_t* ids, int64_t count,
                     float* out, int64_t ld_out) {
  KILN_RETURN_IF_ERROR(CheckIds(ids, count, vocab));
  ParallelRanges(ctx, count, std::max<int64_t>(1, 4096 / std::max<int64_t>(dim, 1)),
                 [&](int64_t begin, int64_t end, int) {
                   for (int64_t i = begin; i < end; ++i) {
                     dequantize(static_cast<const uint8_t*>(table) + static_cast<size_t>(ids[i]) * row_bytes,
                                out + i * ld_out, dim);
                   }
                 });
  return Status::Ok();
}

}  // namespace kiln::cpu
