// Moving a 4-d tensor's elements between memory layouts (kiln.Reorder):
// row-major NCHW, channels-last NHWC, and NCHW16c (channels in blocks of 16,
// the block's padding lanes zero). The reference works element by element
// for any pair of layouts and any plain dtype; the fast path moves whole
// planes of 4-byte elements to and from row-major.
#pragma once

#include <cstdint>

#include "graph/tensor_type.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// Where element (n, c, h, w) of a tensor of `dims` (N,C,H,W) lies in
// `layout`, in elements.
int64_t LayoutOffset(const std::vector<int64_t>& dims, TensorLayout layout, int64_t n, int64_t c, int64_t h,
                     int64_t w);

// dst (TensorBytesIn(type, to) bytes) = src (in `from`), padding zeroed.
void ReferenceReorder(const TensorType& type, TensorLayout from, TensorLayout to, const void* src, void* dst);

// The same for 4-byte elements where one side is row-major; false (nothing
// written) for other cases. `pool` may be null.
bool FastReorder(const TensorType& type, TensorLayout from, TensorLayout to, const void* src, void* dst,
                 ThreadPool* pool);

// FastReorder's AVX-512 kernel for f32 between row-major and nchw16c:
// pixels [p_begin, p_end) of channel block cb of image n
// (layout_reorder_avx512.cc).
void ReorderBlockPixelsAvx512(const float* src, float* dst, bool to_blocked, int64_t channels, int64_t pixels,
                              int64_t n, int64_t cb, int64_t p_begin, int64_t p_end);

}  // namespace kiln::cpu
