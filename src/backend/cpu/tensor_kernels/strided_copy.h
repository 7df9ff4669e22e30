// The data movement under the shape family's kernels: copying a strided
// view of one buffer into another (Transpose, Slice, Expand, Tile,
// DepthToSpace, Pad's interior, Concat, Split), and copying through per-axis
// index tables (nearest Resize, Pad's reflect and edge modes). Elements are
// moved by their byte size, so one routine serves every dtype. The fast
// versions copy contiguous runs with memcpy, transpose in cache-sized
// tiles and split big copies over the thread pool; the reference versions
// walk one element at a time and are what the tests compare them with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu::shape_kernels {

struct StridedCopySpec {
  size_t elem_bytes = 4;             // 1, 2, 4 or 8
  std::vector<int64_t> dims;         // the copied shape
  std::vector<int64_t> src_strides;  // in elements; 0 repeats, negative walks backwards
  std::vector<int64_t> dst_strides;  // in elements
};

// dst[sum i_a * dst_strides[a]] = src[sum i_a * src_strides[a]] for every
// index in dims. src and dst point at the first element's position.
void StridedCopy(const StridedCopySpec& spec, const uint8_t* src, uint8_t* dst, ThreadPool* pool);
void StridedCopyReference(const StridedCopySpec& spec, const uint8_t* src, uint8_t* dst);

// Row-major strides (in elements) of dims.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims);

// dst (contiguous, dims = each table's size) [i_0, ..., i_n] =
// src[sum_a offsets[a][i_a]], offsets in elements.
void IndexTableCopy(size_t elem_bytes, const std::vector<std::vector<int64_t>>& offsets, const uint8_t* src,
                    uint8_t* dst, ThreadPool* pool);
void IndexTableCopyReference(size_t elem_bytes, const std::vector<std::vector<int64_t>>& offsets,
                             const uint8_t* src, uint8_t* dst);

// memcpy, split over the pool when it is big.
void ParallelMemcpy(void* dst, const void* src, size_t bytes, ThreadPool* pool);

// Bytes below which a copy stays on the calling thread.
inline constexpr int64_t kParallelCopyBytes = 1 << 18;

}  // namespace kiln::cpu::shape_kernels
