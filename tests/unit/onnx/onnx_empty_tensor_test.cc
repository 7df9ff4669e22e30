// A graph whose input has a zero-size dimension: every value is empty, and
// the run succeeds with empty outputs (nothing is planned for them).
#include <gtest/gtest.h>

#include <cstdlib>

#include "onnx/onnx_session.h"

namespace kiln {
namespace onnx_empty_tensor_tests {

TEST(OnnxEmptyTensors, ZeroSizeIntermediatesRun) {
  const std::string path = ::testing::TempDir() + "/two_relu.onnx";
  const std::string cmd = "/usr/bin/python3 -c \"\n"
                          "import onnx\n"
                          "from onnx import helper as h, TensorProto as T\n"
                          "n = [h.make_node('Relu', ['x'], ['a'], name='r1'), h.make_node('Relu', ['a'], ['y'], name='r2')]\n"
                          "g = h.make_graph(n, 'g', [h.make_tensor_value_info('x', T.FLOAT, ['n', 4])],\n"
                          "                 [h.make_tensor_value_info('y', T.FLOAT, ['n', 4])])\n"
                          "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '" +
                          path + "')\n\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto session = OnnxSession::Load(path);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto out = (*session)->Run({{"x", HostTensor(TensorType{DType::kF32, {0, 4}})}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].type, (TensorType{DType::kF32, {0, 4}}));
  // The same session then runs a non-empty shape.
  HostTensor x(TensorType{DType::kF32, {1, 4}});
  x.data<float>()[0] = -1;
  x.data<float>()[1] = 2;
  auto again = (*session)->Run({{"x", x}});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)[0].data<float>()[0], 0.0f);
  EXPECT_EQ((*again)[0].data<float>()[1], 2.0f);
}

}  // namespace onnx_empty_tensor_tests
}  // namespace kiln
