// ConvTranspose: ONNX's documented example, output_shape / output_padding /
// auto_pad sizes, and the adjoint identity <ConvT(x), y> = <x, Conv(y)>
// (the same weight tensor) over strides, pads, dilations and groups.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "unit/tensor_ops/conv_test_util.h"

namespace kiln {
namespace conv_transpose_tests {

Expected<TensorData> RunOne(const char* op, std::vector<TensorData> inputs, AttributeMap attrs) {
  cpu::TensorOpRun run;
  run.op_type = op;
  run.node = "up1";
  run.attrs = std::move(attrs);
  for (auto& t : inputs) run.inputs.push_back(std::move(t));
  KILN_ASSIGN_OR_RETURN(std::vector<TensorData> out, cpu::RunTensorOp(run));
  return out[0];
}

TEST(ConvTranspose, DocumentedExample) {
  std::vector<float> x(9);
  for (int i = 0; i < 9; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  auto y = RunOne(
      "ConvTranspose",
      {conv_test::Floats({1, 1, 3, 3}, x), conv_test::Floats({1, 2, 3, 3}, std::vector<float>(18, 1.0f))},
      {});
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(y->type().dims, (std::vector<int64_t>{1, 2, 5, 5}));
  const std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                    27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(y->As<float>()[i], plane[i % 25]) << i;
}

TEST(ConvTranspose, OutputShapePaddingAndAutoPad) {
  const TensorData x = conv_test::RandomTensor({1, 1, 3, 3}, 1), w = conv_test::RandomTensor({1, 2, 3, 3}, 2);
  AttributeMap a;
  a.SetInts("strides", {3, 2});
  a.SetInts("output_shape", {10, 8});
  auto y = RunOne("ConvTranspose", {x, w}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(y->type().dims, (std::vector<int64_t>{1, 2, 10, 8}));
  AttributeMap b;
  b.SetInts("strides", {3, 2});
  b.SetInts("output_padding", {1, 1});
  y = RunOne("ConvTranspose", {x, w}, b);
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(y->type().dims, (std::vector<int64_t>{1, 2, 10, 8}));
  AttributeMap c;
  c.SetInts("strides", {2, 2});
  c.SetString("auto_pad", "SAME_UPPER");
  y = RunOne("ConvTranspose", {x, w}, c);
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(y->type().dims, (std::vector<int64_t>{1, 2, 6, 6}));
}

double Dot(const TensorData& a, const TensorData& b) {
  double s = 0.0;
  for (int64_t i = 0; i < a.type().ElementCount(); ++i)
    s += static_cast<double>(a.As<float>()[i]) * b.As<float>()[i];
  return s;
}

TEST(ConvTranspose, IsTheAdjointOfConv) {
  struct Case {
    int64_t c, m, group;
    std::vector<int64_t> in, kernel, strides, dilations, pads;
  };
  const std::vector<Case> cases = {
      {3, 4, 1, {5, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {4, 6, 2, {4, 5}, {3, 2}, {1, 2}, {2, 1}, {2, 0, 1, 1}},
      {2, 2, 2, {6, 3}, {4, 4}, {2, 3}, {1, 1}, {1, 2, 2, 1}},
      {2, 3, 1, {7}, {3}, {2}, {2}, {1, 2}},
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    AttributeMap a;
    a.SetInt("group", c.group);
    a.SetInts("strides", c.strides);
    a.SetInts("dilations", c.dilations);
    a.SetInts("pads", c.pads);
    std::vector<int64_t> x_dims = {1, c.c}, w_dims = {c.c, c.m / c.group};
    x_dims.insert(x_dims.end(), c.in.begin(), c.in.end());
    w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
    const TensorData x = conv_test::RandomTensor(x_dims, seed++), w = conv_test::RandomTensor(w_dims, seed++);
    auto up = RunOne("ConvTranspose", {x, w}, a);
    ASSERT_TRUE(up.ok()) << up.status().message();
    const TensorData y = conv_test::RandomTensor(up->type().dims, seed++);
    auto down = RunOne("Conv", {y, w}, a);
    ASSERT_TRUE(down.ok()) << down.status().message();
    ASSERT_EQ(down->type().dims, x_dims);
    EXPECT_NEAR(Dot(*up, y), Dot(x, *down), 1e-4 * (1.0 + std::fabs(Dot(x, *down))));
  }
}

TEST(ConvTranspose, ChannelMismatchIsAnError) {
  auto y = RunOne("ConvTranspose",
                  {conv_test::RandomTensor({1, 3, 4, 4}, 1), conv_test::RandomTensor({2, 2, 3, 3}, 2)}, {});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("ConvTranspose up1: input channels 3"), std::string::npos)
      << y.status().message();
}

}  // namespace conv_transpose_tests
}  // namespace kiln

namespace kiln {
namespace conv_transpose_tests {

// The GEMM + scatter path (weights known when the kernel is made) against
// the reference loops, on one and two threads.
TEST(ConvTranspose, GemmPathMatchesTheReference) {
  struct Case {
    int64_t c, m, group;
    std::vector<int64_t> in, kernel, strides, dilations, pads, output_padding, output_shape;
  };
  const std::vector<Case> cases = {
      {8, 6, 1, {7, 9}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {}, {}},
      {6, 4, 2, {5, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {}},
      {5, 7, 1, {4, 5}, {3, 4}, {1, 3}, {2, 1}, {2, 0, 1, 1}, {}, {}},
      {4, 4, 4, {6, 6}, {4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {}, {}},
      {3, 2, 1, {3, 3}, {3, 3}, {3, 2}, {1, 1}, {}, {}, {10, 8}},
      {6, 5, 1, {11}, {3}, {2}, {2}, {1, 2}, {1}, {}},
  };
  ThreadPool pool(2);
  uint32_t seed = 50;
  for (const Case& c : cases) {
    AttributeMap a;
    a.SetInt("group", c.group);
    a.SetInts("strides", c.strides);
    a.SetInts("dilations", c.dilations);
    if (!c.pads.empty()) a.SetInts("pads", c.pads);
    if (!c.output_padding.empty()) a.SetInts("output_padding", c.output_padding);
    if (!c.output_shape.empty()) a.SetInts("output_shape", c.output_shape);
    std::vector<int64_t> x_dims = {2, c.c}, w_dims = {c.c, c.m / c.group};
    x_dims.insert(x_dims.end(), c.in.begin(), c.in.end());
    w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
    cpu::TensorOpRun run;
    run.op_type = "ConvTranspose";
    run.attrs = a;
    run.inputs = {conv_test::RandomTensor(x_dims, seed++), conv_test::RandomTensor(w_dims, seed++),
                  conv_test::RandomTensor({c.m}, seed++)};
    run.inputs_are_constants = true;
    std::optional<TensorData> expected;
    {
      conv_test::ScopedConvImpl scoped("reference");
      auto out = cpu::RunTensorOp(run);
      ASSERT_TRUE(out.ok()) << out.status().message();
      expected = (*out)[0];
    }
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      run.pool = p;
      auto out = cpu::RunTensorOp(run);
      ASSERT_TRUE(out.ok()) << out.status().message();
      ASSERT_EQ((*out)[0].type(), expected->type());
      conv_test::ExpectClose((*out)[0].As<float>(), expected->As<float>(), expected->type().ElementCount(),
                             1e-5f, "gemm col2im");
    }
  }
}

}  // namespace conv_transpose_tests
}  // namespace kiln
