// Token embedding lookup: rows of the embedding table, by token id, as fp32.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"
#include "core/dtype.h"
#include "core/status.h"

namespace kiln::cpu {

// out row i (at out + i * ld_out) = table row ids[i] as fp32, for i < count;
// the table is [vocab][dim] of F32, F16 or BF16. Fails, writing nothing, on
// an id outside [0, vocab) or another dtype.
Status Embedding(const KernelContext& ctx, DType table_type, const void* table, int64_t vocab, int64_t dim,
                 const int32_t* ids, int64_t count, float* out, int64_t ld_out);

// Turns one stored row (row_bytes bytes) into dim floats: the hook for
// block-quantized tables.
using RowDequantizer = void (*)(const void* row, float* out, int64_t dim);

// As Embedding for a table of vocab rows of row_bytes bytes each, decoded
// by `dequantize`.
Status EmbeddingWith(const KernelContext& ctx, RowDequantizer dequantize, const void* table,
                     int64_t row_bytes, int64_t vocab, int64_t dim, const int32_t* ids, int64_t count,
                     float* out, int64_t ld_out);

}  // namespace kiln::cpu
