// Row copies with memcpy, and their byte-loop references.
#include "backend/cpu/kernels/row_copy.h"

#include <cstring>

namespace kiln::cpu {
namespace {

const uint8_t* Row(const void* base, int64_t r, size_t stride) {
  return static_cast<const uint8_t*>(base) + static_cast<size_t>(r) * stride;
}
uint8_t* Row(void* base, int64_t r, size_t stride) {
  return static_cast<uint8_t*>(base) + static_cast<size_t>(r) * stride;
}

}  // namespace

void CopyRows(int64_t rows, size_t row_bytes, const void* src, size_t src_stride, void* dst, size_t dst_stride) {
  if (src == dst) return;
  for (int64_t r = 0; r < rows; ++r) std::memcpy(Row(dst, r, dst_stride), Row(src, r, src_stride), row_bytes);
}

void GatherRows(int64_t count, const int32_t* ids, size_t row_bytes, const void* src, size_t src_stride,
                void* dst, size_t dst_stride) {
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(Row(dst, i, dst_stride), Row(src, ids[i], src_stride), row_bytes);
  }
}

namespace ref {

void CopyRows(int64_t rows, size_t row_bytes, const void* src, size_t src_stride, void* dst, size_t dst_stride) {
  if (src == dst) return;
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < row_bytes; ++b) Row(dst, r, dst_stride)[b] = Row(src, r, src_stride)[b];
  }
}

void GatherRows(int64_t count, const int32_t* ids, size_t row_bytes, const void* src, size_t src_stride,
                void* dst, size_t dst_stride) {
  for (int64_t i = 0; i < count; ++i) {
    for (size_t b = 0; b < row_bytes; ++b) Row(dst, i, dst_stride)[b] = Row(src, ids[i], src_stride)[b];
  }
}

}  // namespace ref
}  // namespace kiln::cpu
