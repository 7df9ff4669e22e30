// Row copies and gathers: the memcpy kernels against the byte-loop
// references, with strides wider than the rows, and the in-place copy.
#include "backend/cpu/kernels/row_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel_test_util.h"

namespace kiln::cpu {
namespace row_copy_tests {

using testing::RandomFloats;

TEST(RowCopy, CopiesRowsBetweenStridesAsTheReferenceDoes) {
  const int64_t rows = 7;
  const size_t cols = 13, src_ld = 16, dst_ld = 21;
  std::vector<float> src = RandomFloats(rows * src_ld, 3);
  std::vector<float> got(rows * dst_ld, -7.0f), want(rows * dst_ld, -7.0f);
  CopyRows(rows, cols * sizeof(float), src.data(), src_ld * sizeof(float), got.data(), dst_ld * sizeof(float));
  ref::CopyRows(rows, cols * sizeof(float), src.data(), src_ld * sizeof(float), want.data(), dst_ld * sizeof(float));
  EXPECT_TRUE(testing::BitEqual(got.data(), want.data(), got.size()));
  // The reference itself: each row's columns, the padding untouched.
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < dst_ld; ++c) {
      const float expected = c < cols ? src[static_cast<size_t>(r) * src_ld + c] : -7.0f;
      ASSERT_EQ(want[static_cast<size_t>(r) * dst_ld + c], expected) << "row " << r << " col " << c;
    }
  }
}

TEST(RowCopy, CopiesBytesOfAnyRowWidthAndNothingInPlace) {
  std::vector<uint8_t> src(5 * 9), got(5 * 11, 0xAB), want(5 * 11, 0xAB);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 1);
  CopyRows(5, 3, src.data(), 9, got.data(), 11);
  ref::CopyRows(5, 3, src.data(), 9, want.data(), 11);
  EXPECT_EQ(got, want);
  EXPECT_EQ(want[11], src[9]);
  EXPECT_EQ(want[3], 0xAB);

  std::vector<uint8_t> same = src;
  CopyRows(5, 9, same.data(), 9, same.data(), 9);
  EXPECT_EQ(same, src);
  CopyRows(0, 9, src.data(), 9, got.data(), 9);  // no rows: nothing
  EXPECT_EQ(got, want);
}

TEST(RowCopy, GathersRowsByIndexAsTheReferenceDoes) {
  const size_t cols = 10, src_ld = 12, dst_ld = 10;
  std::vector<float> src = RandomFloats(6 * src_ld, 9);
  const std::vector<int32_t> ids = {5, 0, 0, 3};
  std::vector<float> got(ids.size() * dst_ld, 1.5f), want(ids.size() * dst_ld, 1.5f);
  GatherRows(static_cast<int64_t>(ids.size()), ids.data(), cols * sizeof(float), src.data(), src_ld * sizeof(float),
             got.data(), dst_ld * sizeof(float));
  ref::GatherRows(static_cast<int64_t>(ids.size()), ids.data(), cols * sizeof(float), src.data(),
                  src_ld * sizeof(float), want.data(), dst_ld * sizeof(float));
  EXPECT_TRUE(testing::BitEqual(got.data(), want.data(), got.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(std::memcmp(&want[i * dst_ld], &src[static_cast<size_t>(ids[i]) * src_ld], cols * sizeof(float)), 0)
        << "row " << i;
  }
}

}  // namespace row_copy_tests
}  // namespace kiln::cpu
