// The fuse stage's transformer patterns (compiler/transformer_fusions.h) on
// graphs written as exporters write them: each pattern becomes its one op,
// the result equals the unfused graph's, and a pattern whose intermediate
// value is read elsewhere is left alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "compiler/compiled_tensor_graph.h"
#include "onnx/onnx_session.h"

namespace kiln {
namespace transformer_fusion_tests {

// Writes a model with onnx.helper: `nodes` is Python building `n` (nodes)
// and `inits` (initializers) over input x [2, 5, 8] and output y.
std::string WriteModel(const std::string& name, const std::string& body, const std::string& extra_outputs = "") {
  const std::string path = ::testing::TempDir() + "/" + name + ".onnx";
  const std::string script = ::testing::TempDir() + "/" + name + ".py";
  FILE* f = std::fopen(script.c_str(), "w");
  std::fprintf(f,
               "import numpy as np, onnx\n"
               "from onnx import helper as h, numpy_helper as nh, TensorProto as T\n"
               "rng = np.random.default_rng(3)\n"
               "def c(name, v): return nh.from_array(np.asarray(v, dtype=np.float32), name)\n"
               "n = []; inits = []\n"
               "%s\n"
               "outs = [h.make_tensor_value_info('y', T.FLOAT, None)]%s\n"
               "g = h.make_graph(n, 'g', [h.make_tensor_value_info('x', T.FLOAT, [2, 5, 8])], outs, inits)\n"
               "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '%s')\n",
               body.c_str(), extra_outputs.c_str(), path.c_str());
  std::fclose(f);
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script).c_str()), 0);
  return path;
}

const char* kLayerNorm =
    "n += [h.make_node('ReduceMean', ['x'], ['m'], axes=[-1]), h.make_node('Sub', ['x', 'm'], ['d']),\n"
    "      h.make_node('Pow', ['d', 'two'], ['p']), h.make_node('ReduceMean', ['p'], ['v'], axes=[-1]),\n"
    "      h.make_node('Add', ['v', 'eps'], ['ve']), h.make_node('Sqrt', ['ve'], ['s']),\n"
    "      h.make_node('Div', ['d', 's'], ['nrm']), h.make_node('Mul', ['nrm', 'gamma'], ['sc']),\n"
    "      h.make_node('Add', ['sc', 'beta'], ['y'])]\n"
    "inits += [c('two', 2.0), c('eps', 1e-5), c('gamma', rng.normal(size=8)), c('beta', rng.normal(size=8))]";

// x -> MatMul(W) + b -> GELU as torch exports it (x/sqrt2, erf, +1, *x, *0.5).
const char* kMlp =
    "n += [h.make_node('MatMul', ['x', 'w'], ['mm']), h.make_node('Add', ['mm', 'b'], ['z']),\n"
    "      h.make_node('Div', ['z', 'sqrt2'], ['t']), h.make_node('Erf', ['t'], ['e']),\n"
    "      h.make_node('Add', ['e', 'one'], ['e1']), h.make_node('Mul', ['z', 'e1'], ['ze']),\n"
    "      h.make_node('Mul', ['ze', 'half'], ['y'])]\n"
    "inits += [c('w', rng.normal(size=(8, 8))), c('b', rng.normal(size=8)), c('sqrt2', 1.4142135381698608),\n"
    "          c('one', 1.0), c('half', 0.5)]";

// GELU with the half taken first: (x * 0.5) * (1 + erf(x * (1/sqrt2))).
const char* kGeluHalfFirst =
    "n += [h.make_node('Mul', ['x', 'rsqrt2'], ['t']), h.make_node('Erf', ['t'], ['e']),\n"
    "      h.make_node('Add', ['one', 'e'], ['e1']), h.make_node('Mul', ['half', 'x'], ['xh']),\n"
    "      h.make_node('Mul', ['xh', 'e1'], ['y'])]\n"
    "inits += [c('rsqrt2', 0.7071067690849304), c('one', 1.0), c('half', 0.5)]";

struct Compiled {
  std::vector<float> y;
  std::vector<std::string> fusions;
  std::vector<std::string> ops;
};

Compiled CompileAndRun(const std::string& path, bool fuse) {
  OnnxSessionOptions options;
  options.fuse = fuse;
  Compiled c;
  auto session = OnnxSession::Load(path, options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return c;
  HostTensor x(TensorType{DType::kF32, {2, 5, 8}});
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  for (int64_t i = 0; i < 80; ++i) x.data<float>()[i] = normal(rng);
  auto out = (*session)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return c;
  const HostTensor& y = (*out)[0];
  c.y.assign(y.data<float>(), y.data<float>() + y.type.ElementCount());
  auto compiled = (*session)->Compiled({x.type});
  EXPECT_TRUE(compiled.ok());
  c.fusions = (*compiled)->report().fuse.fusions;
  for (const Node& n : (*compiled)->graph().nodes()) c.ops.push_back(n.op_type);
  return c;
}

void ExpectSame(const Compiled& fused, const Compiled& plain) {
  ASSERT_EQ(fused.y.size(), plain.y.size());
  for (size_t i = 0; i < plain.y.size(); ++i) {
    EXPECT_NEAR(fused.y[i], plain.y[i], 2e-5f * std::max(1.0f, std::fabs(plain.y[i]))) << i;
  }
}

int Count(const std::vector<std::string>& v, const std::string& s) {
  int n = 0;
  for (const auto& e : v) n += e.find(s) != std::string::npos;
  return n;
}

TEST(TransformerFusions, LayerNormPatternBecomesLayerNormalization) {
  const std::string path = WriteModel("ln", kLayerNorm);
  Compiled fused = CompileAndRun(path, true), plain = CompileAndRun(path, false);
  EXPECT_EQ(fused.ops, std::vector<std::string>{"LayerNormalization"});
  EXPECT_EQ(Count(fused.fusions, "layer norm"), 1);
  ExpectSame(fused, plain);
}

TEST(TransformerFusions, MatMulBiasAndGeluFuse) {
  const std::string path = WriteModel("mlp", kMlp);
  Compiled fused = CompileAndRun(path, true), plain = CompileAndRun(path, false);
  EXPECT_EQ(fused.ops, (std::vector<std::string>{"kiln.FusedMatMul", "Gelu"}));
  EXPECT_EQ(Count(fused.fusions, "gelu"), 1);
  EXPECT_EQ(Count(fused.fusions, "matmul bias"), 1);
  ExpectSame(fused, plain);
}

TEST(TransformerFusions, GeluWithTheHalfTakenFirst) {
  const std::string path = WriteModel("gelu_half_first", kGeluHalfFirst);
  Compiled fused = CompileAndRun(path, true), plain = CompileAndRun(path, false);
  EXPECT_EQ(fused.ops, std::vector<std::string>{"Gelu"});
  ExpectSame(fused, plain);
}

TEST(TransformerFusions, APatternWhoseIntermediateIsAnOutputStays) {
  // The variance is a graph output too: nothing may swallow it.
  const std::string path = WriteModel("ln_shared", kLayerNorm, " + [h.make_tensor_value_info('v', T.FLOAT, None)]");
  Compiled fused = CompileAndRun(path, true);
  EXPECT_EQ(Count(fused.fusions, "layer norm"), 0);
  EXPECT_EQ(Count(fused.ops, "LayerNormalization"), 0);
}

TEST(TransformerFusions, AConstantThatIsNotOneStaysUnfused) {
  std::string body = kMlp;
  body.replace(body.find("c('one', 1.0)"), 13, "c('one', 1.5)");
  const std::string path = WriteModel("not_gelu", body);
  Compiled fused = CompileAndRun(path, true), plain = CompileAndRun(path, false);
  EXPECT_EQ(Count(fused.ops, "Gelu"), 0);
  EXPECT_EQ(Count(fused.ops, "Erf"), 1);
  ExpectSame(fused, plain);
}

}  // namespace transformer_fusion_tests
}  // namespace kiln
