// A vision graph on the test accelerator, whose support list has
// convolutions and activations but not Softmax, Resize or Transpose: those
// fall back to the CPU with their cost in the plan, values cross between the
// memory domains, and the outputs are the CPU's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backend/cpu/kernels/isa.h"
#include "compiler/compiled_tensor_graph.h"
#include "onnx/onnx_session.h"

namespace kiln {
namespace onnx_accelerator_tests {

std::string MakeModel() {
  const std::string path = ::testing::TempDir() + "/accel_vision.onnx";
  const std::string cmd = "/usr/bin/python3 -c \"\n"
                          "import numpy as np, onnx, onnx.numpy_helper as nh\n"
                          "from onnx import helper as h, TensorProto as T\n"
                          "r = np.random.default_rng(3)\n"
                          "W1 = nh.from_array(r.standard_normal((8, 3, 3, 3)).astype(np.float32), 'W1')\n"
                          "W2 = nh.from_array(r.standard_normal((4, 8, 1, 1)).astype(np.float32), 'W2')\n"
                          "sc = nh.from_array(np.array([1, 1, 2, 2], dtype=np.float32), 'sc')\n"
                          "n = [h.make_node('Conv', ['x', 'W1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),\n"
                          "     h.make_node('Relu', ['c1'], ['r1'], name='relu1'),\n"
                          "     h.make_node('Resize', ['r1', '', 'sc'], ['u'], name='up', mode='nearest'),\n"
                          "     h.make_node('Conv', ['u', 'W2'], ['c2'], name='conv2'),\n"
                          "     h.make_node('Softmax', ['c2'], ['y'], name='softmax', axis=1)]\n"
                          "g = h.make_graph(n, 'g', [h.make_tensor_value_info('x', T.FLOAT, [1, 3, 8, 8])],\n"
                          "                 [h.make_tensor_value_info('y', T.FLOAT, None)], [W1, W2, sc])\n"
                          "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '" +
                          path + "')\n\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return path;
}

std::vector<float> RunOn(const std::string& path, const std::string& backend, std::string* plan) {
  OnnxSessionOptions options;
  options.backend = backend;
  auto session = OnnxSession::Load(path, options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  HostTensor x(TensorType{DType::kF32, {1, 3, 8, 8}});
  for (int i = 0; i < 192; ++i) x.data<float>()[i] = static_cast<float>((i * 37) % 19) / 19.0f - 0.5f;
  auto out = (*session)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  auto compiled = (*session)->Compiled({x.type});
  if (compiled.ok()) *plan = TensorPlanText(**compiled, true);
  const HostTensor& y = (*out)[0];
  return std::vector<float>(y.data<float>(), y.data<float>() + y.type.ElementCount());
}

TEST(OnnxOnAccelerator, UnsupportedOpsFallBackWithTheirCostAndOutputsMatchTheCpu) {
  const std::string path = MakeModel();
  std::string cpu_plan, accel_plan;
  const std::vector<float> cpu = RunOn(path, "cpu", &cpu_plan);
  const std::vector<float> accel = RunOn(path, "testaccel", &accel_plan);
  ASSERT_EQ(cpu.size(), 4u * 16 * 16);
  ASSERT_EQ(accel.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(accel[i], cpu[i], 1e-5f) << i;
  // The plan names each fallback with its op and cost, and the transfers.
  EXPECT_NE(accel_plan.find("fallbacks to cpu: 2 nodes"), std::string::npos) << accel_plan;
  EXPECT_NE(accel_plan.find("Resize"), std::string::npos);
  EXPECT_NE(accel_plan.find("Softmax"), std::string::npos);
  EXPECT_NE(accel_plan.find("transfer"), std::string::npos);
  EXPECT_NE(accel_plan.find("conv epilogue: conv1 + relu1"), std::string::npos) << accel_plan;
  EXPECT_EQ(cpu_plan.find("fallbacks to cpu"), std::string::npos);
  // Its convolutions index NHWC (from AVX2 on): transposes (run by the
  // CPU) at each border; none meet here, the Resize between the
  // convolutions is the CPU's.
  if (!cpu::IsaAvailable(cpu::Isa::kAvx2)) return;
  EXPECT_NE(accel_plan.find("activations nhwc on testaccel: 2 nodes"), std::string::npos) << accel_plan;
  EXPECT_NE(accel_plan.find("reorders: 4 inserted at layout borders, 0 pairs cancelled where two met, 4 kept"),
            std::string::npos);
  EXPECT_NE(accel_plan.find("reorder x: row-major -> nhwc"), std::string::npos);
}

// Three convolutions in a row on the accelerator: the transposes between
// them meet and cancel; only the chain's ends are reordered.
TEST(OnnxOnAccelerator, TransposesBetweenTwoNhwcConvolutionsCancel) {
  const std::string path = ::testing::TempDir() + "/accel_conv_chain.onnx";
  const std::string cmd = "/usr/bin/python3 -c \"\n"
                          "import numpy as np, onnx, onnx.numpy_helper as nh\n"
                          "from onnx import helper as h, TensorProto as T\n"
                          "r = np.random.default_rng(5)\n"
                          "W1 = nh.from_array(r.standard_normal((8, 3, 3, 3)).astype(np.float32), 'W1')\n"
                          "W2 = nh.from_array(r.standard_normal((8, 8, 3, 3)).astype(np.float32), 'W2')\n"
                          "W3 = nh.from_array(r.standard_normal((4, 8, 1, 1)).astype(np.float32), 'W3')\n"
                          "n = [h.make_node('Conv', ['x', 'W1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),\n"
                          "     h.make_node('Relu', ['c1'], ['r1'], name='relu1'),\n"
                          "     h.make_node('Conv', ['r1', 'W2'], ['c2'], name='conv2', pads=[1, 1, 1, 1]),\n"
                          "     h.make_node('Conv', ['c2', 'W3'], ['c3'], name='conv3'),\n"
                          "     h.make_node('Softmax', ['c3'], ['y'], name='softmax', axis=1)]\n"
                          "g = h.make_graph(n, 'g', [h.make_tensor_value_info('x', T.FLOAT, [1, 3, 8, 8])],\n"
                          "                 [h.make_tensor_value_info('y', T.FLOAT, None)], [W1, W2, W3])\n"
                          "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '" +
                          path + "')\n\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string cpu_plan, accel_plan;
  const std::vector<float> cpu = RunOn(path, "cpu", &cpu_plan);
  const std::vector<float> accel = RunOn(path, "testaccel", &accel_plan);
  ASSERT_EQ(cpu.size(), 4u * 8 * 8);
  ASSERT_EQ(accel.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(accel[i], cpu[i], 1e-5f) << i;
  // The CPU keeps these small convolutions row-major.
  EXPECT_EQ(cpu_plan.find("kiln.Reorder"), std::string::npos) << cpu_plan;
  if (!cpu::IsaAvailable(cpu::Isa::kAvx2)) return;  // the accelerator's convolutions are NHWC from AVX2 on
  EXPECT_NE(accel_plan.find("activations nhwc on testaccel: 3 nodes"), std::string::npos) << accel_plan;
  EXPECT_NE(accel_plan.find("reorders: 6 inserted at layout borders, 2 pairs cancelled where two met, 2 kept"),
            std::string::npos);
}

// A depthwise convolution keeps its ONNX attribute `group` on the way to the
// plugin (the ABI's fixed field of the same name once hid it).
TEST(OnnxOnAccelerator, DepthwiseConvolutionKeepsItsGroup) {
  const std::string path = ::testing::TempDir() + "/accel_depthwise.onnx";
  const std::string cmd = "/usr/bin/python3 -c \"\n"
                          "import numpy as np, onnx, onnx.numpy_helper as nh\n"
                          "from onnx import helper as h, TensorProto as T\n"
                          "r = np.random.default_rng(7)\n"
                          "W1 = nh.from_array(r.standard_normal((8, 3, 3, 3)).astype(np.float32), 'W1')\n"
                          "W2 = nh.from_array(r.standard_normal((8, 1, 3, 3)).astype(np.float32), 'W2')\n"
                          "n = [h.make_node('Conv', ['x', 'W1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),\n"
                          "     h.make_node('Conv', ['c1', 'W2'], ['c2'], name='dw', pads=[1, 1, 1, 1], group=8),\n"
                          "     h.make_node('Softmax', ['c2'], ['y'], name='softmax', axis=1)]\n"
                          "g = h.make_graph(n, 'g', [h.make_tensor_value_info('x', T.FLOAT, [1, 3, 8, 8])],\n"
                          "                 [h.make_tensor_value_info('y', T.FLOAT, None)], [W1, W2])\n"
                          "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '" +
                          path + "')\n\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string cpu_plan, accel_plan;
  const std::vector<float> cpu = RunOn(path, "cpu", &cpu_plan);
  const std::vector<float> accel = RunOn(path, "testaccel", &accel_plan);
  ASSERT_EQ(cpu.size(), 8u * 8 * 8);
  ASSERT_EQ(accel.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(accel[i], cpu[i], 1e-5f) << i;
  EXPECT_NE(accel_plan.find("dw"), std::string::npos);
  EXPECT_NE(accel_plan.find("testaccel"), std::string::npos) << accel_plan;
}

}  // namespace onnx_accelerator_tests
}  // namespace kiln
