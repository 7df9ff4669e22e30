// The fast strided and table copies against their one-element-at-a-time
// references, on the shapes the shape family's kernels produce.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/cpu/tensor_kernels/strided_copy.h"
#include "core/thread_pool.h"

namespace kiln::cpu::shape_kernels {
namespace shape_strided_copy_tests {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// A transpose of dims by perm, as the Transpose kernel builds it.
StridedCopySpec TransposeSpec(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm,
                              size_t elem) {
  StridedCopySpec s;
  s.elem_bytes = elem;
  const std::vector<int64_t> in_strides = ContiguousStrides(dims);
  for (int64_t p : perm) {
    s.dims.push_back(dims[static_cast<size_t>(p)]);
    s.src_strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  s.dst_strides = ContiguousStrides(s.dims);
  return s;
}

void ExpectSameAsReference(const StridedCopySpec& spec, const std::vector<uint8_t>& src, int64_t src_offset,
                           size_t dst_elems, ThreadPool* pool) {
  std::vector<uint8_t> fast(dst_elems * spec.elem_bytes, 0xAB), ref(dst_elems * spec.elem_bytes, 0xAB);
  StridedCopy(spec, src.data() + src_offset * static_cast<int64_t>(spec.elem_bytes), fast.data(), pool);
  StridedCopyReference(spec, src.data() + src_offset * static_cast<int64_t>(spec.elem_bytes), ref.data());
  ASSERT_EQ(fast, ref);
}

TEST(ShapeStridedCopy, EveryFourDPermutationOfEveryElementSize) {
  const std::vector<int64_t> dims = {2, 3, 5, 7};
  std::vector<int64_t> perm = {0, 1, 2, 3};
  for (size_t elem : {1, 2, 4, 8}) {
    const std::vector<uint8_t> src = RandomBytes(210 * elem, static_cast<uint32_t>(elem));
    do {
      SCOPED_TRACE(testing::Message()
                   << "elem " << elem << " perm " << perm[0] << perm[1] << perm[2] << perm[3]);
      ExpectSameAsReference(TransposeSpec(dims, perm, elem), src, 0, 210, nullptr);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(ShapeStridedCopy, BigTransposesSplitOverThePoolMatchTheReference) {
  ThreadPool pool(2);
  // A 2-d last-two swap (one big matrix), a batched 3-d swap, NCHW->NHWC and NHWC->NCHW.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{301, 517}, {1, 0}},
      {{4, 130, 257}, {0, 2, 1}},
      {{1, 64, 40, 40}, {0, 2, 3, 1}},
      {{1, 40, 40, 64}, {0, 3, 1, 2}},
  };
  for (const auto& [dims, perm] : cases) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const std::vector<uint8_t> src = RandomBytes(static_cast<size_t>(n) * 4, 7);
    ExpectSameAsReference(TransposeSpec(dims, perm, 4), src, 0, static_cast<size_t>(n), &pool);
  }
}

TEST(ShapeStridedCopy, NegativeStepsBroadcastsAndSizeOneAxes) {
  ThreadPool pool(2);
  const std::vector<uint8_t> src = RandomBytes(4 * 6 * 8 * 4, 3);
  // Every other [6, 8] block backwards from the last of four: blocks 3 and 1.
  StridedCopySpec s;
  s.elem_bytes = 4;
  s.dims = {2, 1, 6, 8};
  s.src_strides = {-2 * 48, 0, 8, 1};
  s.dst_strides = ContiguousStrides(s.dims);
  ExpectSameAsReference(s, src, 3 * 48, 96, nullptr);
  // Columns reversed (an element run with stride -1).
  s.dims = {4, 6, 8};
  s.src_strides = {48, 8, -1};
  s.dst_strides = ContiguousStrides(s.dims);
  ExpectSameAsReference(s, src, 7, 192, nullptr);
  // A broadcast (stride 0) of a row, big enough to go parallel.
  s.dims = {512, 300};
  s.src_strides = {0, 1};
  s.dst_strides = ContiguousStrides(s.dims);
  const std::vector<uint8_t> row = RandomBytes(300 * 4, 4);
  ExpectSameAsReference(s, row, 0, 512 * 300, &pool);
  // A broadcast of one element along the inner axis.
  s.dims = {6, 50};
  s.src_strides = {1, 0};
  s.dst_strides = ContiguousStrides(s.dims);
  ExpectSameAsReference(s, row, 0, 300, nullptr);
}

TEST(ShapeStridedCopy, EmptyShapesCopyNothing) {
  StridedCopySpec s;
  s.elem_bytes = 4;
  s.dims = {3, 0, 2};
  s.src_strides = {2, 2, 1};
  s.dst_strides = {0, 2, 1};
  std::vector<uint8_t> dst(8, 0xAB);
  StridedCopy(s, nullptr, dst.data(), nullptr);
  EXPECT_EQ(dst, std::vector<uint8_t>(8, 0xAB));
}

TEST(ShapeStridedCopy, IndexTablesMatchTheReference) {
  ThreadPool pool(2);
  // A nearest 2x upsample of [1, 3, 40, 50]: repeated rows and a duplicating inner table.
  const std::vector<int64_t> in = {1, 3, 40, 50};
  std::vector<std::vector<int64_t>> tables(4);
  tables[0] = {0};
  for (int64_t c = 0; c < 3; ++c) tables[1].push_back(c * 2000);
  for (int64_t y = 0; y < 80; ++y) tables[2].push_back((y / 2) * 50);
  for (int64_t x = 0; x < 100; ++x) tables[3].push_back(x / 2);
  for (size_t elem : {1, 4}) {
    const std::vector<uint8_t> src = RandomBytes(6000 * elem, 9);
    std::vector<uint8_t> fast(24000 * elem), ref(24000 * elem);
    IndexTableCopy(elem, tables, src.data(), fast.data(), &pool);
    IndexTableCopyReference(elem, tables, src.data(), ref.data());
    EXPECT_EQ(fast, ref) << "elem " << elem;
  }
  // Inner tables that repeat each source 3 times, and one whose last run is cut short.
  for (const std::vector<int64_t>& inner :
       std::vector<std::vector<int64_t>>{{4, 4, 4, 5, 5, 5, 6, 6, 6}, {0, 0, 1, 1, 2}, {3, 3, 2, 2}}) {
    std::vector<std::vector<int64_t>> t = {{0, 16, 16}, inner};
    const std::vector<uint8_t> src = RandomBytes(32 * 4, 12);
    std::vector<uint8_t> fast(3 * inner.size() * 4), ref(3 * inner.size() * 4);
    IndexTableCopy(4, t, src.data(), fast.data(), nullptr);
    IndexTableCopyReference(4, t, src.data(), ref.data());
    EXPECT_EQ(fast, ref);
  }
  // A contiguous inner table (reflect padding of rows only).
  std::vector<std::vector<int64_t>> rows = {{2 * 8, 1 * 8, 0, 8, 16, 24, 16}, {0, 1, 2, 3, 4, 5, 6, 7}};
  const std::vector<uint8_t> src = RandomBytes(32 * 2, 5);
  std::vector<uint8_t> fast(56 * 2), ref(56 * 2);
  IndexTableCopy(2, rows, src.data(), fast.data(), nullptr);
  IndexTableCopyReference(2, rows, src.data(), ref.data());
  EXPECT_EQ(fast, ref);
}

TEST(ShapeStridedCopy, ParallelMemcpyCopiesEveryByte) {
  ThreadPool pool(2);
  const std::vector<uint8_t> src = RandomBytes((1 << 20) + 13, 11);
  std::vector<uint8_t> dst(src.size());
  ParallelMemcpy(dst.data(), src.data(), src.size(), &pool);
  EXPECT_EQ(dst, src);
}

}  // namespace shape_strided_copy_tests
}  // namespace kiln::cpu::shape_kernels
