// kiln.Reorder: the plane loops against the element-by-element reference,
// round trips, and the zeros in nchw16c's padding lanes.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "backend/cpu/tensor_kernels/layout_reorder.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"
#include "graph/tensor_op.h"

namespace kiln::cpu {
namespace layout_reorder_tests {

std::vector<float> Ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f + 1.0f;
  return v;
}

// A buffer for `type` in `layout`, filled with a value no reorder writes.
std::vector<float> Poisoned(const TensorType& type, TensorLayout layout) {
  return std::vector<float>(TensorBytesIn(type, layout) / sizeof(float), -7.0f);
}

TEST(LayoutReorder, OffsetsOfEachLayout) {
  const std::vector<int64_t> d = {2, 20, 3, 5};
  EXPECT_EQ(LayoutOffset(d, TensorLayout::kRowMajor, 1, 2, 1, 4), ((1 * 20 + 2) * 3 + 1) * 5 + 4);
  EXPECT_EQ(LayoutOffset(d, TensorLayout::kNHWC, 1, 2, 1, 4), ((1 * 3 + 1) * 5 + 4) * 20 + 2);
  // 20 channels: 2 blocks of 16; channel 17 is lane 1 of block 1.
  EXPECT_EQ(LayoutOffset(d, TensorLayout::kNCHW16c, 1, 17, 1, 4), (((1 * 2 + 1) * 3 + 1) * 5 + 4) * 16 + 1);
  EXPECT_EQ(TensorBytesIn(TensorType{DType::kF32, d}, TensorLayout::kNCHW16c), 2u * 32 * 3 * 5 * 4);
  EXPECT_EQ(TensorBytesIn(TensorType{DType::kF32, d}, TensorLayout::kNHWC), 2u * 20 * 3 * 5 * 4);
}

TEST(LayoutReorder, FastPathMatchesTheReferenceBothWays) {
  ThreadPool pool(2);
  // 23 x 17 pixels: more than one run of the fast path's pixel tiles.
  for (const auto& [channels, H, W] : std::vector<std::array<int64_t, 3>>{
           {1, 3, 5}, {3, 3, 5}, {16, 3, 5}, {20, 3, 5}, {35, 3, 5}, {20, 23, 17}}) {
    const TensorType type{DType::kF32, {2, channels, H, W}};
    const std::vector<float> x = Ramp(type.ElementCount());
    for (TensorLayout other : {TensorLayout::kNCHW16c, TensorLayout::kNHWC}) {
      SCOPED_TRACE(std::string(TensorLayoutName(other)) + " C=" + std::to_string(channels));
      std::vector<float> want = Poisoned(type, other), got = Poisoned(type, other);
      ReferenceReorder(type, TensorLayout::kRowMajor, other, x.data(), want.data());
      ASSERT_TRUE(FastReorder(type, TensorLayout::kRowMajor, other, x.data(), got.data(), &pool));
      EXPECT_EQ(got, want);
      // Every element where LayoutOffset says, the padding zero.
      std::vector<bool> placed(want.size(), false);
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w) {
              const auto at = static_cast<size_t>(LayoutOffset(type.dims, other, n, c, h, w));
              EXPECT_EQ(want[at], x[static_cast<size_t>(((n * channels + c) * H + h) * W + w)]);
              placed[at] = true;
            }
      for (size_t i = 0; i < want.size(); ++i) {
        if (!placed[i]) {
          EXPECT_EQ(want[i], 0.0f) << "padding lane " << i;
        }
      }
      std::vector<float> back_ref = Poisoned(type, TensorLayout::kRowMajor), back = back_ref;
      ReferenceReorder(type, other, TensorLayout::kRowMajor, want.data(), back_ref.data());
      ASSERT_TRUE(FastReorder(type, other, TensorLayout::kRowMajor, want.data(), back.data(), nullptr));
      EXPECT_EQ(back_ref, x);
      EXPECT_EQ(back, x);
    }
  }
}

TEST(LayoutReorder, BetweenTwoOtherLayoutsTheReferenceRuns) {
  const TensorType type{DType::kF32, {1, 20, 2, 3}};
  const std::vector<float> x = Ramp(type.ElementCount());
  std::vector<float> nhwc = Poisoned(type, TensorLayout::kNHWC),
                     blocked = Poisoned(type, TensorLayout::kNCHW16c);
  std::vector<float> want = blocked;
  EXPECT_FALSE(
      FastReorder(type, TensorLayout::kNHWC, TensorLayout::kNCHW16c, nhwc.data(), blocked.data(), nullptr));
  ReferenceReorder(type, TensorLayout::kRowMajor, TensorLayout::kNHWC, x.data(), nhwc.data());
  ReferenceReorder(type, TensorLayout::kNHWC, TensorLayout::kNCHW16c, nhwc.data(), blocked.data());
  ReferenceReorder(type, TensorLayout::kRowMajor, TensorLayout::kNCHW16c, x.data(), want.data());
  EXPECT_EQ(blocked, want);
}

TEST(LayoutReorder, TheKernelEntryRunsTheOp) {
  const TensorType type{DType::kF32, {1, 20, 2, 3}};
  AttributeMap attrs;
  attrs.SetString("from", "row-major");
  attrs.SetString("to", "nchw16c");
  ShapeContext ctx;
  ctx.op_type = "kiln.Reorder";
  ctx.node = "r";
  ctx.attrs = &attrs;
  ctx.inputs = {TensorOpInput{&type, nullptr}};
  auto shape = InferTensorOp(ctx);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->outputs[0], type);  // the dims stay N,C,H,W

  TensorKernelArgs args;
  args.op_type = "kiln.Reorder";
  args.node = "r";
  args.attrs = &attrs;
  args.inputs = {type};
  args.present = {true};
  args.constants = {nullptr};
  args.outputs = {type};
  auto kernel = MakeTensorKernel(args);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  const std::vector<float> x = Ramp(type.ElementCount());
  std::vector<float> y = Poisoned(type, TensorLayout::kNCHW16c), want = y;
  const void* ins[] = {x.data()};
  void* outs[] = {y.data()};
  TensorCall call;
  call.inputs = ins;
  call.outputs = outs;
  ASSERT_TRUE(kernel->run(call).ok());
  ReferenceReorder(type, TensorLayout::kRowMajor, TensorLayout::kNCHW16c, x.data(), want.data());
  EXPECT_EQ(y, want);

  // A layout other than row-major on a tensor that is not 4-d, and an unknown name, are errors.
  const TensorType flat{DType::kF32, {20, 6}};
  ctx.inputs = {TensorOpInput{&flat, nullptr}};
  EXPECT_FALSE(InferTensorOp(ctx).ok());
  attrs.SetString("to", "nchw8c");
  ctx.inputs = {TensorOpInput{&type, nullptr}};
  EXPECT_FALSE(InferTensorOp(ctx).ok());
}

}  // namespace layout_reorder_tests
}  // namespace kiln::cpu
