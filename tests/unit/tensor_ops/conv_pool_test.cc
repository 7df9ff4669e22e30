// The pools against the values ONNX's operator documentation gives, and
// their errors.
#include <gtest/gtest.h>

#include "unit/tensor_ops/conv_test_util.h"

namespace kiln {
namespace conv_pool_tests {

TensorData Ramp(const std::vector<int64_t>& dims) {
  std::vector<float> v(static_cast<size_t>(conv_test::Count(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return conv_test::Floats(dims, v);
}

Expected<std::vector<TensorData>> Pool(const char* op, TensorData x, AttributeMap attrs, int outputs = 1) {
  cpu::TensorOpRun run;
  run.op_type = op;
  run.node = "pool3";
  run.attrs = std::move(attrs);
  run.inputs = {std::move(x)};
  run.num_outputs = outputs;
  return cpu::RunTensorOp(run);
}

void ExpectValues(const TensorData& t, const std::vector<int64_t>& dims, const std::vector<float>& expected) {
  ASSERT_EQ(t.type().dims, dims);
  ASSERT_EQ(t.type().ElementCount(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(t.As<float>()[i], expected[i], 1e-5f) << i;
}

AttributeMap Attrs(std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                   std::vector<int64_t> pads = {}) {
  AttributeMap a;
  a.SetInts("kernel_shape", std::move(kernel));
  if (!strides.empty()) a.SetInts("strides", std::move(strides));
  if (!pads.empty()) a.SetInts("pads", std::move(pads));
  return a;
}

TEST(MaxPool, PadsCeilModeDilationsAndSameUpper) {
  auto y = Pool("MaxPool", Ramp({1, 1, 5, 5}), Attrs({5, 5}, {}, {2, 2, 2, 2}));
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 5, 5}, {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                                       25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25});
  AttributeMap ceil = Attrs({3, 3}, {2, 2});
  ceil.SetInt("ceil_mode", 1);
  y = Pool("MaxPool", Ramp({1, 1, 4, 4}), ceil);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 2, 2}, {11, 12, 15, 16});
  AttributeMap dilated = Attrs({2, 2});
  dilated.SetInts("dilations", {2, 2});
  y = Pool("MaxPool", Ramp({1, 1, 4, 4}), dilated);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 2, 2}, {11, 12, 15, 16});
  AttributeMap same = Attrs({3, 3}, {2, 2});
  same.SetString("auto_pad", "SAME_UPPER");
  y = Pool("MaxPool", Ramp({1, 1, 5, 5}), same);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 3, 3}, {7, 9, 10, 17, 19, 20, 22, 24, 25});
}

TEST(MaxPool, IndicesInBothStorageOrders) {
  auto y = Pool("MaxPool", Ramp({1, 1, 5, 5}), Attrs({5, 5}, {}, {2, 2, 2, 2}), 2);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ((*y)[1].type(), (TensorType{DType::kI64, {1, 1, 5, 5}}));
  const std::vector<int64_t> expected = {12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24,
                                         24, 24, 22, 23, 24, 24, 24, 22, 23, 24, 24, 24};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ((*y)[1].As<int64_t>()[i], expected[i]) << i;
  AttributeMap column_major = Attrs({2, 2}, {2, 2});
  column_major.SetInt("storage_order", 1);
  y = Pool("MaxPool", Ramp({1, 1, 5, 5}), column_major, 2);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 2, 2}, {7, 9, 17, 19});
  const std::vector<int64_t> column_indices = {6, 16, 8, 18};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ((*y)[1].As<int64_t>()[i], column_indices[i]) << i;
  // Indices count the batch and channel planes too.
  y = Pool("MaxPool", Ramp({2, 3, 2, 2}), Attrs({2, 2}), 2);
  ASSERT_TRUE(y.ok()) << y.status().message();
  for (int64_t p = 0; p < 6; ++p) EXPECT_EQ((*y)[1].As<int64_t>()[p], p * 4 + 3);
}

TEST(AveragePool, CountIncludePadAndCeilMode) {
  auto y = Pool("AveragePool", Ramp({1, 1, 5, 5}), Attrs({5, 5}, {}, {2, 2, 2, 2}));
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 5, 5}, {7,  7.5,  8,  8.5,  9,  9.5,  10, 10.5, 11, 11.5, 12, 12.5, 13, 13.5,
                                       14, 14.5, 15, 15.5, 16, 16.5, 17, 17.5, 18, 18.5, 19});
  AttributeMap with_pad = Attrs({5, 5}, {}, {2, 2, 2, 2});
  with_pad.SetInt("count_include_pad", 1);
  y = Pool("AveragePool", Ramp({1, 1, 5, 5}), with_pad);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 5, 5},
               {2.52, 3.6, 4.8,  4.08, 3.24, 4.56,  6.4,  8.4,  7.04, 5.52, 7.2,  10,  13,
                10.8, 8.4, 6.96, 9.6,  12.4, 10.24, 7.92, 6.12, 8.4,  10.8, 8.88, 6.84});
  AttributeMap ceil = Attrs({3, 3}, {2, 2});
  ceil.SetInt("ceil_mode", 1);
  y = Pool("AveragePool", Ramp({1, 1, 4, 4}), ceil);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 2, 2}, {6, 7.5, 12, 13.5});
  y = Pool("AveragePool", Ramp({1, 2, 5}), Attrs({2}, {2}));
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 2, 2}, {1.5, 3.5, 6.5, 8.5});
}

TEST(LpPool, TwoNorm) {
  auto y = Pool("LpPool", conv_test::Floats({1, 1, 1, 2}, {3, 4}), Attrs({1, 2}));
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 1, 1}, {5});
}

TEST(GlobalPool, AverageMaxAndLp) {
  auto y = Pool("GlobalAveragePool", Ramp({1, 2, 3, 3}), {});
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 2, 1, 1}, {5, 14});
  y = Pool("GlobalMaxPool", Ramp({2, 1, 7}), {});
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {2, 1, 1}, {7, 14});
  y = Pool("GlobalLpPool", conv_test::Floats({1, 1, 2}, {3, -4}), {});
  ASSERT_TRUE(y.ok()) << y.status().message();
  ExpectValues((*y)[0], {1, 1, 1}, {5});
}

TEST(Pool, ErrorsNameTheNode) {
  auto y = Pool("MaxPool", Ramp({1, 1, 4, 4}), {});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("MaxPool pool3: the attribute kernel_shape is required"),
            std::string::npos)
      << y.status().message();
  y = Pool("AveragePool", Ramp({1, 1, 2, 2}), Attrs({3, 3}));
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("AveragePool pool3: the kernel"), std::string::npos)
      << y.status().message();
  y = Pool("GlobalAveragePool", Ramp({4}), {});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("GlobalAveragePool pool3"), std::string::npos) << y.status().message();
}

}  // namespace conv_pool_tests
}  // namespace kiln

namespace kiln {
namespace conv_pool_tests {

TEST(MaxPool, Uint8) {
  std::vector<uint8_t> v = {1, 200, 3, 4, 5, 6, 7, 8, 9};
  auto y = Pool("MaxPool", TensorData::FromValues<uint8_t>(DType::kU8, {1, 1, 3, 3}, v), Attrs({2, 2}));
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ((*y)[0].type(), (TensorType{DType::kU8, {1, 1, 2, 2}}));
  const std::vector<uint8_t> expected = {200, 200, 8, 9};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ((*y)[0].As<uint8_t>()[i], expected[i]) << i;
  auto avg = Pool("AveragePool", TensorData::FromValues<uint8_t>(DType::kU8, {1, 1, 3, 3}, v), Attrs({2, 2}));
  ASSERT_FALSE(avg.ok());
}

}  // namespace conv_pool_tests
}  // namespace kiln

namespace kiln {
namespace conv_pool_tests {

struct Geometry {
  std::vector<int64_t> in, kernel, strides, dilations, pads;
  int ceil = 0;
};

std::vector<Geometry> Geometries() {
  return {
      {{13, 12}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}}, {{9, 10}, {2, 3}, {1, 2}, {1, 1}, {0, 1, 1, 0}},
      {{11, 11}, {3, 3}, {2, 2}, {2, 2}, {2, 2, 2, 2}}, {{10, 9}, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 1},
      {{20, 33}, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}}, {{8, 40}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}}};
}

AttributeMap AttrsOf(const Geometry& g) {
  AttributeMap a = Attrs(g.kernel, g.strides, g.pads);
  a.SetInts("dilations", g.dilations);
  a.SetInt("ceil_mode", g.ceil);
  return a;
}

// MaxPool's row-at-a-time path (no Indices) against the per-window path
// that also finds the indices.
TEST(MaxPool, RowPathMatchesTheWindowPath) {
  uint32_t seed = 3;
  for (const Geometry& g : Geometries()) {
    std::vector<int64_t> dims = {2, 3};
    dims.insert(dims.end(), g.in.begin(), g.in.end());
    const TensorData x = conv_test::RandomTensor(dims, seed++);
    auto rows = Pool("MaxPool", x, AttrsOf(g), 1);
    auto windows = Pool("MaxPool", x, AttrsOf(g), 2);
    ASSERT_TRUE(rows.ok()) << rows.status().message();
    ASSERT_TRUE(windows.ok()) << windows.status().message();
    ASSERT_EQ((*rows)[0].type(), (*windows)[0].type());
    for (int64_t i = 0; i < (*rows)[0].type().ElementCount(); ++i) {
      ASSERT_EQ((*rows)[0].As<float>()[i], (*windows)[0].As<float>()[i]) << i;
    }
  }
}

// AveragePool counting the pads is a depthwise convolution with weights
// 1 / taps.
TEST(AveragePool, CountingPadsEqualsADepthwiseConvolution) {
  uint32_t seed = 30;
  for (const Geometry& g : Geometries()) {
    if (g.ceil != 0) continue;
    std::vector<int64_t> dims = {1, 3};
    dims.insert(dims.end(), g.in.begin(), g.in.end());
    const TensorData x = conv_test::RandomTensor(dims, seed++);
    AttributeMap a = AttrsOf(g);
    a.SetInt("count_include_pad", 1);
    auto avg = Pool("AveragePool", x, a, 1);
    ASSERT_TRUE(avg.ok()) << avg.status().message();
    const int64_t taps = g.kernel[0] * g.kernel[1];
    cpu::TensorOpRun conv;
    conv.op_type = "Conv";
    conv.attrs.SetInt("group", 3);
    conv.attrs.SetInts("strides", g.strides);
    conv.attrs.SetInts("dilations", g.dilations);
    conv.attrs.SetInts("pads", g.pads);
    conv.inputs = {x, conv_test::Floats({3, 1, g.kernel[0], g.kernel[1]},
                                        std::vector<float>(static_cast<size_t>(3 * taps),
                                                           1.0f / static_cast<float>(taps)))};
    auto y = cpu::RunTensorOp(conv);
    ASSERT_TRUE(y.ok()) << y.status().message();
    ASSERT_EQ((*y)[0].type(), (*avg)[0].type());
    conv_test::ExpectClose((*avg)[0].As<float>(), (*y)[0].As<float>(), (*y)[0].type().ElementCount(), 1e-5f,
                           "avg");
  }
}

}  // namespace conv_pool_tests
}  // namespace kiln
