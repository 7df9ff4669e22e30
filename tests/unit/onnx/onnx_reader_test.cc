// The ONNX reader on valid models: everything in the file arrives in OnnxModel.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/half.h"
#include "onnx/onnx_reader.h"
#include "onnx_test_models.h"

namespace kiln {
namespace onnx_reader_tests {

using testing::OnnxTestModel;

OnnxModel Read(const std::string& name, const OnnxReadOptions& options = {}) {
  Expected<OnnxModel> m = ReadOnnxModel(OnnxTestModel(name), options);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : OnnxModel{};
}

template <typename T>
std::vector<T> Values(const OnnxTensor& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  std::memcpy(v.data(), t.data.data(), v.size() * sizeof(T));
  return v;
}

const OnnxNode* FindNode(const OnnxGraph& g, const std::string& name) {
  for (const OnnxNode& n : g.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

size_t NodeIndex(const OnnxGraph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name == name) return i;
  }
  return g.nodes.size();
}

TEST(OnnxReader, ReadsModelHeaderAndOpsets) {
  OnnxModel m = Read("basic.onnx");
  EXPECT_EQ(m.ir_version, 8);
  EXPECT_EQ(m.producer_name, "kiln-tests");
  EXPECT_EQ(m.producer_version, "1.0");
  EXPECT_EQ(m.default_opset(), 13);
  EXPECT_EQ(m.opset_imports.size(), 1u);
  EXPECT_EQ(m.graph.name, "basic");
}

TEST(OnnxReader, ReadsInputsAndOutputsWithSymbolicDims) {
  OnnxModel m = Read("basic.onnx");
  // conv.bias is an initializer listed among the inputs too: not an input a caller feeds.
  ASSERT_EQ(m.graph.inputs.size(), 2u);
  const OnnxValueInfo& images = m.graph.inputs[0];
  EXPECT_EQ(images.name, "images");
  EXPECT_EQ(images.dtype, DType::kF32);
  ASSERT_TRUE(images.shape);
  ASSERT_EQ(images.shape->size(), 4u);
  EXPECT_FALSE((*images.shape)[0].is_static());
  EXPECT_EQ((*images.shape)[0].symbol, "batch");
  EXPECT_EQ((*images.shape)[1].value, 3);
  EXPECT_EQ((*images.shape)[3].value, 4);
  EXPECT_FALSE(images.has_static_shape());
  const OnnxValueInfo& mask = m.graph.inputs[1];
  EXPECT_EQ(mask.dtype, DType::kBool);
  ASSERT_TRUE(mask.shape);
  EXPECT_FALSE((*mask.shape)[0].is_static());
  EXPECT_EQ((*mask.shape)[0].symbol, "");
  EXPECT_EQ((*mask.shape)[1].value, 2);

  ASSERT_EQ(m.graph.outputs.size(), 3u);
  EXPECT_EQ(m.graph.outputs[0].name, "logits");
  EXPECT_EQ((*m.graph.outputs[0].shape)[0].symbol, "batch");
  EXPECT_EQ(m.graph.outputs[1].name, "mask_out");
  EXPECT_EQ(m.graph.outputs[1].dtype, DType::kBool);
  EXPECT_FALSE(m.graph.outputs[1].shape);
  EXPECT_TRUE(m.graph.outputs[2].has_static_shape());
}

TEST(OnnxReader, InputShapeOverrideBindsSymbolicDims) {
  OnnxReadOptions options;
  options.input_shapes["images"] = {2, 3, 4, 4};
  options.input_shapes["mask"] = {5, 2};
  OnnxModel m = Read("basic.onnx", options);
  EXPECT_TRUE(m.graph.inputs[0].has_static_shape());
  EXPECT_EQ((*m.graph.inputs[0].shape)[0].value, 2);
  EXPECT_EQ((*m.graph.inputs[1].shape)[0].value, 5);
}

TEST(OnnxReader, ReadsInitializersOfEveryTypeAndEncoding) {
  OnnxModel m = Read("basic.onnx");
  const OnnxGraph& g = m.graph;
  EXPECT_EQ(g.initializers.size(), 12u);

  const OnnxTensor* w = g.FindInitializer("conv.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->dims, (std::vector<int64_t>{2, 3, 1, 1}));
  EXPECT_EQ(w->element_count(), 6);
  EXPECT_EQ(Values<float>(*w), (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));

  EXPECT_EQ(Values<float>(*g.FindInitializer("conv.bias")), (std::vector<float>{0.25f, -1.5f}));
  EXPECT_EQ(g.FindInitializer("shape")->dtype, DType::kI64);
  EXPECT_EQ(Values<int64_t>(*g.FindInitializer("shape")), (std::vector<int64_t>{1, -1}));

  const OnnxTensor* half = g.FindInitializer("half");
  EXPECT_EQ(half->dtype, DType::kF16);
  std::vector<uint16_t> hb = Values<uint16_t>(*half);
  ASSERT_EQ(hb.size(), 3u);
  EXPECT_EQ(F16ToF32(hb[0]), 1.0f);
  EXPECT_EQ(F16ToF32(hb[1]), -2.0f);
  EXPECT_EQ(F16ToF32(hb[2]), 0.5f);
  std::vector<uint16_t> ht = Values<uint16_t>(*g.FindInitializer("half_typed"));
  ASSERT_EQ(ht.size(), 2u);
  EXPECT_EQ(F16ToF32(ht[0]), 3.0f);
  EXPECT_EQ(F16ToF32(ht[1]), -0.25f);

  EXPECT_EQ(Values<int32_t>(*g.FindInitializer("i32")), (std::vector<int32_t>{7, -8, 2147483647}));
  EXPECT_EQ(g.FindInitializer("i32_raw")->dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int32_t>(*g.FindInitializer("i32_raw")), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(g.FindInitializer("flags")->dtype, DType::kBool);
  EXPECT_EQ(g.FindInitializer("flags")->data.view(), std::string("\x01\x00\x01", 3));
  EXPECT_EQ(g.FindInitializer("u8")->dtype, DType::kU8);
  EXPECT_EQ(g.FindInitializer("u8")->data.view(), std::string("\x00\xff\x11", 3));
  EXPECT_EQ(g.FindInitializer("i8")->dtype, DType::kI8);
  EXPECT_EQ(Values<int8_t>(*g.FindInitializer("i8")), (std::vector<int8_t>{-128, 127}));
  const OnnxTensor* scalar = g.FindInitializer("scalar");
  EXPECT_TRUE(scalar->dims.empty());
  EXPECT_EQ(scalar->element_count(), 1);
  EXPECT_EQ(Values<float>(*scalar), (std::vector<float>{2.5f}));
  EXPECT_EQ(g.FindInitializer("empty")->element_count(), 0);
  EXPECT_TRUE(g.FindInitializer("empty")->data.empty());
}

TEST(OnnxReader, ReadsNodesAndAttributesInTopologicalOrder) {
  OnnxModel m = Read("basic.onnx");
  const OnnxGraph& g = m.graph;
  ASSERT_EQ(g.nodes.size(), 6u);
  // The file lists relu before the conv that feeds it.
  EXPECT_LT(NodeIndex(g, "conv"), NodeIndex(g, "relu"));
  EXPECT_LT(NodeIndex(g, "relu"), NodeIndex(g, "LeakyRelu_2"));
  EXPECT_LT(NodeIndex(g, "LeakyRelu_2"), NodeIndex(g, "reshape"));

  const OnnxNode* conv = FindNode(g, "conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->op_type, "Conv");
  EXPECT_EQ(conv->domain, "");
  EXPECT_EQ(conv->inputs, (std::vector<std::string>{"images", "conv.weight", "conv.bias"}));
  EXPECT_EQ(conv->outputs, (std::vector<std::string>{"conv_out"}));
  ASSERT_NE(conv->FindAttribute("kernel_shape"), nullptr);
  EXPECT_EQ(conv->FindAttribute("kernel_shape")->kind, OnnxAttribute::Kind::kInts);
  EXPECT_EQ(conv->FindAttribute("kernel_shape")->ints, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv->FindAttribute("group")->kind, OnnxAttribute::Kind::kInt);
  EXPECT_EQ(conv->FindAttribute("group")->i, 1);
  EXPECT_EQ(conv->FindAttribute("auto_pad")->kind, OnnxAttribute::Kind::kString);
  EXPECT_EQ(conv->FindAttribute("auto_pad")->s, "NOTSET");
  EXPECT_EQ(conv->FindAttribute("dilations"), nullptr);

  const OnnxNode* leaky = FindNode(g, "LeakyRelu_2");  // unnamed in the file
  ASSERT_NE(leaky, nullptr);
  EXPECT_EQ(leaky->FindAttribute("alpha")->kind, OnnxAttribute::Kind::kFloat);
  EXPECT_EQ(leaky->FindAttribute("alpha")->f, 0.125f);

  const OnnxNode* constant = FindNode(g, "const");
  ASSERT_NE(constant, nullptr);
  EXPECT_TRUE(constant->inputs.empty());
  const OnnxAttribute* value = constant->FindAttribute("value");
  ASSERT_EQ(value->kind, OnnxAttribute::Kind::kTensor);
  EXPECT_EQ(value->t->dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<float>(*value->t), (std::vector<float>{3.5f, 4.5f}));

  const OnnxNode* tagged = FindNode(g, "tagged");
  EXPECT_EQ(tagged->FindAttribute("tags")->kind, OnnxAttribute::Kind::kStrings);
  EXPECT_EQ(tagged->FindAttribute("tags")->strings, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(tagged->FindAttribute("weights")->kind, OnnxAttribute::Kind::kFloats);
  EXPECT_EQ(tagged->FindAttribute("weights")->floats, (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(tagged->FindAttribute("note")->s, "hello");
}

TEST(OnnxReader, ReadsDoubleBfloat16AndInt16) {
  OnnxModel m = Read("more_types.onnx");
  const OnnxTensor* d = m.graph.FindInitializer("doubles");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->dtype, DType::kF64);
  EXPECT_EQ(Values<double>(*d), (std::vector<double>{0.1, -2.0}));
  const OnnxTensor* i16 = m.graph.FindInitializer("i16");
  EXPECT_EQ(i16->dtype, DType::kI16);
  EXPECT_EQ(Values<int16_t>(*i16), (std::vector<int16_t>{-300, 7}));
  const OnnxTensor* bf = m.graph.FindInitializer("bf16");
  EXPECT_EQ(bf->dtype, DType::kBF16);
  std::vector<uint16_t> bits = Values<uint16_t>(*bf);
  ASSERT_EQ(bits.size(), 2u);
  EXPECT_EQ(Bf16ToF32(bits[0]), 1.0f);
  EXPECT_EQ(Bf16ToF32(bits[1]), -2.0f);
}

TEST(OnnxReader, ReadsExternalDataRelativeToTheModel) {
  OnnxModel m = Read("external.onnx");
  const OnnxTensor* a = m.graph.FindInitializer("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dims, (std::vector<int64_t>{3, 4}));
  std::vector<float> av = Values<float>(*a);
  ASSERT_EQ(av.size(), 12u);
  EXPECT_FLOAT_EQ(av[0], -1.0f);
  EXPECT_FLOAT_EQ(av[11], 1.0f);
  EXPECT_EQ(Values<int64_t>(*m.graph.FindInitializer("b")), (std::vector<int64_t>{5, 6, 7}));
  std::vector<uint16_t> c = Values<uint16_t>(*m.graph.FindInitializer("c"));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(F16ToF32(c[0]), 1.0f);
  EXPECT_EQ(F16ToF32(c[1]), 2.0f);
}

TEST(OnnxReader, ReadsSubgraphsThatUseOuterValues) {
  OnnxModel m = Read("if_subgraph.onnx");
  const OnnxGraph& g = m.graph;
  ASSERT_EQ(g.nodes.size(), 2u);
  // The If reads 'scaled' inside its branches, so the Mul making it comes first.
  EXPECT_EQ(g.nodes[0].name, "square");
  EXPECT_EQ(g.nodes[1].name, "branch");
  const OnnxAttribute* then_branch = g.nodes[1].FindAttribute("then_branch");
  ASSERT_NE(then_branch, nullptr);
  ASSERT_EQ(then_branch->kind, OnnxAttribute::Kind::kGraph);
  ASSERT_EQ(then_branch->g->nodes.size(), 1u);
  EXPECT_EQ(then_branch->g->nodes[0].op_type, "Add");
  EXPECT_EQ(then_branch->g->outputs[0].name, "t_out");
  EXPECT_EQ(g.nodes[1].FindAttribute("else_branch")->g->nodes[0].op_type, "Neg");
  EXPECT_EQ(g.inputs[0].shape->size(), 0u);  // a scalar
  EXPECT_TRUE(g.inputs[0].has_static_shape());
}

TEST(OnnxReader, ReadsNestedSubgraphsWithinTheLimit) {
  OnnxModel m = Read("nested3.onnx");
  const OnnxGraph* g = &m.graph;
  int depth = 0;
  while (!g->nodes.empty() && g->nodes[0].op_type == "If") {
    g = g->nodes[0].FindAttribute("then_branch")->g.get();
    ++depth;
  }
  EXPECT_EQ(depth, 3);
  EXPECT_EQ(g->nodes[0].name, "leaf");
}

TEST(OnnxReader, ReadsATorchExport) {
  std::string path = OnnxTestModel("torch_tiny.onnx");
  if (!std::ifstream(path)) GTEST_SKIP() << "torch is not installed: no exported model";
  OnnxModel m = Read("torch_tiny.onnx");
  ASSERT_EQ(m.graph.inputs.size(), 1u);
  EXPECT_EQ(m.graph.inputs[0].name, "image");
  EXPECT_EQ((*m.graph.inputs[0].shape)[0].symbol, "batch");
  EXPECT_EQ((*m.graph.inputs[0].shape)[1].value, 3);
  EXPECT_EQ(m.graph.outputs[0].name, "logits");
  std::vector<std::string> ops;
  for (const OnnxNode& n : m.graph.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops.front(), "Conv");
  EXPECT_EQ(ops.back(), "Gemm");
  // The Linear's weight, byte for byte as torch held it.
  const OnnxNode& gemm = m.graph.nodes.back();
  const OnnxTensor* fc = m.graph.FindInitializer(gemm.inputs[1]);
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->dims, (std::vector<int64_t>{2, 4}));
  std::ifstream in(OnnxTestModel("torch_tiny_fc_weight.bin"), std::ios::binary);
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(fc->data.view(), expected.str());
  const OnnxTensor* conv_w = m.graph.FindInitializer(m.graph.nodes.front().inputs[1]);
  ASSERT_NE(conv_w, nullptr);
  EXPECT_EQ(conv_w->dims, (std::vector<int64_t>{4, 3, 3, 3}));
}

TEST(OnnxReader, ParsesFromMemoryWithoutExternalData) {
  std::ifstream in(OnnxTestModel("basic.onnx"), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string s = bytes.str();
  Expected<OnnxModel> m = ParseOnnxModel(s.data(), s.size(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->graph.nodes.size(), 6u);
}

}  // namespace onnx_reader_tests
}  // namespace kiln
