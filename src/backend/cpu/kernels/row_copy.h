// Row copies between strided buffers: RoPE's input copied to its output
// where the rows hold more than the rotated heads, values moved between
// memory domains, and the rows whose logits are wanted gathered by index.
// Strides are in bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

// Copies `rows` rows of row_bytes bytes: row r from src + r * src_stride to
// dst + r * dst_stride. Copies nothing when src == dst (a value computed in
// place). REQUIRES: otherwise source and destination rows do not overlap.
void CopyRows(int64_t rows, size_t row_bytes, const void* src, size_t src_stride, void* dst, size_t dst_stride);

// Row i of dst (at dst + i * dst_stride) = row ids[i] of src (at src +
// ids[i] * src_stride), row_bytes bytes each, for i < count.
// REQUIRES: every ids[i] names a row of src (the caller validated them);
// no destination row overlaps a source row.
void GatherRows(int64_t count, const int32_t* ids, size_t row_bytes, const void* src, size_t src_stride,
                void* dst, size_t dst_stride);

namespace ref {
// The same, one byte at a time: what the kernels above are tested against.
void CopyRows(int64_t rows, size_t row_bytes, const void* src, size_t src_stride, void* dst, size_t dst_stride);
void GatherRows(int64_t count, const int32_t* ids, size_t row_bytes, const void* src, size_t src_stride,
                void* dst, size_t dst_stride);
}  // namespace ref

}  // namespace kiln::cpu
