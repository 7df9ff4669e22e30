// kiln.Reorder between row-major and nchw16c on tensors of many pixels: the
// AVX-512 kernel's 16 x 16 register transposes, their last pixels one at a
// time and more than one run of pixels per block (the plane loops where
// the ISA is forced lower), against the element-by-element reference.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/tensor_kernels/layout_reorder.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace layout_reorder_tiles_tests {

TEST(LayoutReorderTiles, ManyPixelsMatchTheReferenceBothWays) {
  ThreadPool pool(2);
  // 17 x 19 = 323 pixels: 20 tiles of 16, a tail of 3, two runs of 256.
  for (auto [channels, height, width] : {std::tuple<int64_t, int64_t, int64_t>{3, 17, 19},
                                         {16, 4, 4},
                                         {24, 17, 19},
                                         {35, 17, 19},
                                         {48, 16, 32}}) {
    const TensorType type{DType::kF32, {2, channels, height, width}};
    SCOPED_TRACE("C=" + std::to_string(channels) + " HW=" + std::to_string(height * width));
    std::vector<float> x(static_cast<size_t>(type.ElementCount()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f - 3.0f;
    const size_t blocked_floats = TensorBytesIn(type, TensorLayout::kNCHW16c) / sizeof(float);
    std::vector<float> want(blocked_floats, -7.0f), got(blocked_floats, -7.0f);
    ReferenceReorder(type, TensorLayout::kRowMajor, TensorLayout::kNCHW16c, x.data(), want.data());
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      ASSERT_TRUE(FastReorder(type, TensorLayout::kRowMajor, TensorLayout::kNCHW16c, x.data(), got.data(), p));
      EXPECT_EQ(got, want);
      std::vector<float> back(x.size(), -7.0f);
      ASSERT_TRUE(FastReorder(type, TensorLayout::kNCHW16c, TensorLayout::kRowMajor, want.data(), back.data(), p));
      EXPECT_EQ(back, x);
    }
  }
}

}  // namespace layout_reorder_tiles_tests
}  // namespace kiln::cpu
