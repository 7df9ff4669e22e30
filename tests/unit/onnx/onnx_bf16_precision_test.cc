// The precision policy on an ONNX graph end to end: convolutions, a Gemm and
// matmuls (one on a weight, one of two activations, one too small to gain),
// a depthwise convolution, softmax and a normalization, compiled fp32, mixed
// and bf16. Where the CPU multiplies bf16 (natively, or emulated with
// KILN_BF16_PRODUCTS=emulated on AVX-512) the plan names the bf16
// products and the outputs stay within cosine 0.999 of fp32 (bf16 keeps 8
// significant bits: each rounding is off by at most 2^-9 relative, and a few
// layers of them leave the outputs a few tenths of a percent off, far inside
// the bound, which corresponds to about 4% relative RMS error); elsewhere the
// plan says why every op stays fp32 and the outputs are fp32's exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "backend/backend.h"
#include "compiler/compiled_tensor_graph.h"
#include "onnx/onnx_session.h"

namespace kiln {
namespace onnx_bf16_precision_tests {

// `depthwise`: with the depthwise convolution (output dw).
std::string MakeModel(bool depthwise = true) {
  const std::string path =
      ::testing::TempDir() + (depthwise ? "/bf16_precision.onnx" : "/bf16_precision_dense.onnx");
  const std::string cmd =
      "/usr/bin/python3 -c \"\n"
      "import numpy as np, onnx, onnx.numpy_helper as nh\n"
      "from onnx import helper as h, TensorProto as T\n"
      "r = np.random.default_rng(5)\n"
      "def w(name, *shape): return nh.from_array((r.standard_normal(shape) / "
      "np.sqrt(np.prod(shape[1:]))).astype(np.float32), name)\n"
      "inits = [w('W1', 32, 32, 3, 3), w('B1', 32), w('W2', 64, 32, 3, 3), w('Wm', 256, 384), w('Wg', 256, "
      "256), w('Bg', 256),\n"
      "         nh.from_array(np.array([1, 64, 256], dtype=np.int64), 'shape'), nh.from_array(np.array([64, "
      "256], dtype=np.int64), 'rows'),\n"
      "         nh.from_array(np.ones(384, np.float32), 'ln_scale'), nh.from_array(np.zeros(384, "
      "np.float32), 'ln_bias')]\n"
      "n = [h.make_node('Conv', ['x', 'W1', 'B1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),\n"
      "     h.make_node('Relu', ['c1'], ['r1'], name='relu1'),\n"
      "     h.make_node('Conv', ['r1', 'W2'], ['c2'], name='conv2', pads=[1, 1, 1, 1], strides=[2, 2]),\n"
      "     h.make_node('Relu', ['c2'], ['r2'], name='relu2'),\n"
      "     h.make_node('Reshape', ['r2', 'shape'], ['flat'], name='flatten_pixels'),\n"
      "     h.make_node('MatMul', ['flat', 'Wm'], ['proj'], name='project'),\n"
      "     h.make_node('LayerNormalization', ['proj', 'ln_scale', 'ln_bias'], ['norm'], name='norm', "
      "axis=-1),\n"
      "     h.make_node('Softmax', ['norm'], ['p'], name='softmax', axis=-1),\n"
      "     h.make_node('Transpose', ['p'], ['pt'], name='transpose', perm=[0, 2, 1]),\n"
      "     h.make_node('MatMul', ['pt', 'p'], ['y'], name='scores'),\n"
      "     h.make_node('Reshape', ['r2', 'rows'], ['channels'], name='channel_rows'),\n"
      "     h.make_node('Gemm', ['channels', 'Wg', 'Bg'], ['logits'], name='classifier'),\n"
      "     h.make_node('GlobalAveragePool', ['r2'], ['pool'], name='pool'),\n"
      "     h.make_node('Flatten', ['pool'], ['pooled'], name='flatten'),\n"
      "     h.make_node('MatMul', ['pooled', 'Wsmall'], ['small'], name='small_product')]\n"
      "inits += [w('Wsmall', 64, 10), w('Wdw', 64, 1, 3, 3)]\n"
      "g = h.make_graph(n, 'g', [h.make_tensor_value_info('x', T.FLOAT, [1, 32, 32, 32])],\n"
      "                 [h.make_tensor_value_info('y', T.FLOAT, None), h.make_tensor_value_info('logits', "
      "T.FLOAT, None),\n"
      "                  h.make_tensor_value_info('small', T.FLOAT, None)], inits)\n"
      "if " +
      std::string(depthwise ? "True" : "False") +
      ":\n"
      "    g.node.append(h.make_node('Conv', ['r2', 'Wdw'], ['dw'], name='depthwise', pads=[1, 1, 1, 1], "
      "group=64))\n"
      "    g.output.append(h.make_tensor_value_info('dw', T.FLOAT, None))\n"
      "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 17)]), '" +
      path + "')\n\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return path;
}

struct PrecisionRun {
  std::vector<std::vector<float>> outputs;
  std::string plan;
};

PrecisionRun RunAt(const std::string& path, Precision precision) {
  OnnxSessionOptions options;
  options.precision = precision;
  options.threads = 2;
  PrecisionRun r;
  auto session = OnnxSession::Load(path, options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return r;
  HostTensor x(TensorType{DType::kF32, {1, 32, 32, 32}});
  for (int i = 0; i < 32 * 32 * 32; ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
  auto out = (*session)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return r;
  for (const HostTensor& t : *out) {
    r.outputs.emplace_back(t.data<float>(), t.data<float>() + t.type.ElementCount());
  }
  auto compiled = (*session)->Compiled({x.type});
  if (compiled.ok()) r.plan = TensorPlanText(**compiled, true);
  return r;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(OnnxBf16Precision, ProductsRunInBf16WhereTheCpuMultipliesItAndStayCloseToFp32) {
  const std::string path = MakeModel();
  const PrecisionRun fp32 = RunAt(path, Precision::kFp32);
  const PrecisionRun mixed = RunAt(path, Precision::kMixed);
  const PrecisionRun bf16 = RunAt(path, Precision::kBf16);
  ASSERT_EQ(fp32.outputs.size(), 4u);
  ASSERT_EQ(mixed.outputs.size(), 4u);
  ASSERT_EQ(bf16.outputs.size(), 4u);
  EXPECT_TRUE(Has(fp32.plan, "precision fp32: every op computes in fp32")) << fp32.plan;
  EXPECT_FALSE(Has(fp32.plan, "bf16 products"));
  // The policy's own question (natively, or emulated with
  // KILN_BF16_PRODUCTS=emulated).
  if (!BackendRegistry::Get().cpu().has_bf16_tensor_products()) {
    // No native bf16: every node stays fp32, and the plan says why.
    for (const PrecisionRun* r : {&mixed, &bf16}) {
      EXPECT_TRUE(Has(r->plan, "this CPU multiplies no bf16 natively")) << r->plan;
      EXPECT_FALSE(Has(r->plan, "bf16 products")) << r->plan;
      EXPECT_EQ(r->outputs, fp32.outputs);
    }
    GTEST_SKIP()
        << "this CPU multiplies no bf16 natively (AVX-512 BF16 or AMX), or KILN_ISA caps it: checked the "
           "fp32 fallback only";
  }
  // mixed: the weight products; the product of two activations stays fp32.
  EXPECT_TRUE(Has(mixed.plan, "precision mixed: 1 Gemm, 1 MatMul, 2 kiln.FusedConv in bf16")) << mixed.plan;
  EXPECT_TRUE(Has(mixed.plan, "precision fp32: 1 MatMul: two run-time operands")) << mixed.plan;
  // A product too small to gain stays fp32 under every policy.
  for (const PrecisionRun* r : {&mixed, &bf16}) {
    EXPECT_TRUE(Has(r->plan, "precision fp32: 1 MatMul: under 5 MFLOP")) << r->plan;
    EXPECT_TRUE(Has(r->plan, "precision fp32: 1 Conv: grouped or depthwise")) << r->plan;
  }
  // bf16: both matmuls.
  EXPECT_TRUE(Has(bf16.plan, "precision bf16: 1 Gemm, 2 MatMul, 2 kiln.FusedConv in bf16")) << bf16.plan;
  EXPECT_TRUE(Has(bf16.plan, "precision fp32: the other")) << bf16.plan;
  for (const char* node : {"conv1", "conv2", "project", "scores", "classifier", "small_product"}) {
    const bool want = std::string(node) != "small_product";
    bool marked = false;
    for (size_t at = bf16.plan.find(std::string("  ") + node); at != std::string::npos && !marked;
         at = bf16.plan.find(std::string("  ") + node, at + 1)) {
      marked =
          bf16.plan.substr(at, bf16.plan.find('\n', at) - at).find("[bf16 products]") != std::string::npos;
    }
    EXPECT_EQ(marked, want) << node << (want ? " is not" : " is") << " marked bf16 in\n" << bf16.plan;
  }
  for (const PrecisionRun* r : {&mixed, &bf16}) {
    for (size_t o = 0; o < 4; ++o) {
      ASSERT_EQ(r->outputs[o].size(), fp32.outputs[o].size());
      EXPECT_NE(r->outputs[o], fp32.outputs[o]) << "output " << o << ": bf16 rounding changed nothing";
      EXPECT_GE(Cosine(r->outputs[o], fp32.outputs[o]), 0.999) << "output " << o;
    }
  }
}

}  // namespace onnx_bf16_precision_tests
}  // namespace kiln

namespace kiln {
namespace onnx_bf16_precision_tests {

// A plugin's products run in bf16 only when its support list says bf16: the
// test accelerator lists f32 alone, so its convolutions and Gemm stay fp32.
// (No depthwise convolution: the test accelerator binds no grouped one.)
TEST(OnnxBf16Precision, APluginWithoutBf16KeepsItsProductsFp32) {
  const std::string path = MakeModel(false);
  OnnxSessionOptions options;
  options.precision = Precision::kBf16;
  options.backend = "testaccel";
  auto session = OnnxSession::Load(path, options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto compiled = (*session)->Compiled({TensorType{DType::kF32, {1, 32, 32, 32}}});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const std::string plan = TensorPlanText(**compiled, true);
  EXPECT_TRUE(Has(plan, "1 Gemm, 2 kiln.FusedConv: backend testaccel lists no bf16 for it")) << plan;
}

}  // namespace onnx_bf16_precision_tests
}  // namespace kiln
