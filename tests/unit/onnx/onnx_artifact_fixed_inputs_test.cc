// Inputs fixed when an ONNX graph is compiled into an artifact (`kiln compile
// M.onnx --input w=W.npy --fixed-input w`): the artifact holds their values
// and what is folded from them (a MatMul's second operand packed once, a
// Reshape's shape), gives the outputs `kiln run M.onnx --fixed-input` gives
// bit for bit, takes no value for them when it runs (one given is an error
// naming it), records them (kiln inspect), and a stale one is rebuilt with
// the same values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/compiled_tensor_graph.h"
#include "core/npy.h"
#include "format/artifact_file.h"
#include "onnx/onnx_artifact.h"
#include "onnx/onnx_session.h"
#include "onnx_test_models.h"
#include "testing/artifact_edit_for_tests.h"
#include "testing/kiln_command_for_tests.h"
#include "testing/test_paths.h"

namespace kiln {
namespace onnx_artifact_fixed_inputs_tests {

using testing::OnnxTestModel;

HostTensor RandomFloats(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  HostTensor t(TensorType{DType::kF32, std::move(dims)});
  for (size_t k = 0; k < t.bytes.size() / 4; ++k) t.data<float>()[k] = normal(rng);
  return t;
}

HostTensor Shape(std::vector<int64_t> values) {
  HostTensor t(TensorType{DType::kI64, {static_cast<int64_t>(values.size())}});
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return t;
}

// fixed_inputs.onnx: y = Reshape(MatMul(x, w), shape), with w and shape fixed.
OnnxSessionOptions FixedWAndShape() {
  OnnxSessionOptions o;
  o.fixed_inputs["w"] = RandomFloats({64, 32}, 11);
  o.fixed_inputs["shape"] = Shape({8, 16});
  return o;
}

std::string CompileFixed(const std::string& name) {
  const std::string out = testing::MakeTempDir() + "/" + name;
  auto summary = CompileOnnxArtifact(OnnxTestModel("fixed_inputs.onnx"), FixedWAndShape(), out);
  EXPECT_TRUE(summary.ok()) << summary.status().ToString();
  return out;
}

// The .onnx file's outputs with w and shape fixed, for `x`.
std::vector<HostTensor> OnnxOutputs(const HostTensor& x) {
  const OnnxSessionOptions fixed = FixedWAndShape();
  auto session = OnnxSession::Load(OnnxTestModel("fixed_inputs.onnx"), fixed);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  std::map<std::string, HostTensor> inputs = fixed.fixed_inputs;
  inputs["x"] = x;
  auto out = (*session)->Run(inputs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(*out) : std::vector<HostTensor>{};
}

void ExpectSameBytes(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j) {
    EXPECT_EQ(got[j].type, want[j].type);
    EXPECT_TRUE(got[j].bytes == want[j].bytes) << "output " << j << " differs";
  }
}

TEST(OnnxArtifactFixedInputs, TheArtifactHoldsTheFixedValuesAndWhatIsFoldedFromThem) {
  const std::string artifact = CompileFixed("fixed_inputs.kiln");
  auto session = OnnxSession::Load(artifact);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  // Only x is an input; the reshape's shape is folded in.
  ASSERT_EQ((*session)->inputs().size(), 1u);
  EXPECT_EQ((*session)->inputs()[0].name, "x");
  const HostTensor x = RandomFloats({4, 64}, 5);
  auto out = (*session)->Run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].type.dims, (std::vector<int64_t>{8, 16}));
  ExpectSameBytes(*out, OnnxOutputs(x));
  // The MatMul's panels of w come from the file, packed at compile time.
  const LaidOutWeights& laid_out = *(*session)->options().laid_out;
  EXPECT_GE(laid_out.adopted(), 1);
  EXPECT_EQ(laid_out.laid_out(), 0);
  // Compiled with the values folded, as stored: no stage ran at load.
  auto compiled = (*session)->Compiled({x.type});
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_TRUE((*compiled)->report().from_artifact);

  // The stored graph holds w (8 KiB: in the weights section) and shape as
  // initializers, not inputs; the metadata names them.
  auto opened = OpenOnnxArtifact(artifact, {});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_EQ(opened->model.graph.inputs.size(), 1u);
  EXPECT_EQ(opened->model.graph.inputs[0].name, "x");
  std::set<std::string> initializers;
  for (const OnnxTensor& t : opened->model.graph.initializers) initializers.insert(t.name);
  EXPECT_EQ(initializers, (std::set<std::string>{"shape", "w"}));
  EXPECT_EQ(opened->metadata.at("weights_moved").get<int>(), 1);
  EXPECT_EQ(opened->metadata.at("options").at("--fixed-input"), nlohmann::json({"shape", "w"}));
  EXPECT_EQ(opened->metadata.at("fixed_inputs").size(), 2u);
  EXPECT_FALSE(opened->metadata.at("input_shapes").contains("w"));
}

TEST(OnnxArtifactFixedInputs, AValueForAnInputFixedAtCompileTimeIsAnError) {
  const std::string artifact = CompileFixed("fixed_inputs_given.kiln");
  auto session = OnnxSession::Load(artifact);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const OnnxSessionOptions fixed = FixedWAndShape();
  // Even the very value it was compiled with: it is not an input any more.
  auto ran = (*session)->Run({{"x", RandomFloats({4, 64}, 5)}, {"w", fixed.fixed_inputs.at("w")}});
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.status().ToString().find("input w: its value was fixed when the artifact was compiled"),
            std::string::npos)
      << ran.status().ToString();
  // --fixed-input at run time: the artifact says it fixed it already.
  auto refixed = OnnxSession::Load(artifact, fixed);
  ASSERT_FALSE(refixed.ok());
  EXPECT_NE(refixed.status().ToString().find("was fixed when the artifact"), std::string::npos)
      << refixed.status().ToString();
  OnnxSessionOptions shape;
  shape.input_shapes["shape"] = {2};
  auto reshaped = OnnxSession::Load(artifact, shape);
  ASSERT_FALSE(reshaped.ok());
  EXPECT_NE(reshaped.status().ToString().find("--input-shape shape: shape was fixed"), std::string::npos)
      << reshaped.status().ToString();
  // Fixing an input the model lacks fails at compile time, naming it.
  OnnxSessionOptions unknown;
  unknown.fixed_inputs["bias"] = Shape({1});
  auto refused = CompileOnnxArtifact(OnnxTestModel("fixed_inputs.onnx"), unknown,
                                     testing::MakeTempDir() + "/fixed_inputs_unknown.kiln");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("bias"), std::string::npos) << refused.status().ToString();
}

TEST(OnnxArtifactFixedInputs, AStaleArtifactIsRebuiltWithTheStoredValues) {
  const std::string artifact = CompileFixed("fixed_inputs_stale.kiln");
  testing::RewriteArtifactMetadata(artifact, artifact + ".tmp", testing::BumpKernelLayoutVersion);
  std::filesystem::rename(artifact + ".tmp", artifact);
  auto refused = OnnxSession::Load(artifact);
  ASSERT_FALSE(refused.ok());
  // The hint to rebuild it by hand names the fixed inputs.
  EXPECT_NE(refused.status().ToString().find("--fixed-input w"), std::string::npos) << refused.status().ToString();
  OnnxSessionOptions rebuild;
  rebuild.recompile_if_stale = true;
  auto rebuilt = OnnxSession::Load(artifact, rebuild);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_EQ((*rebuilt)->options().laid_out->laid_out(), 0);
  const HostTensor x = RandomFloats({4, 64}, 9);
  auto out = (*rebuilt)->Run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectSameBytes(*out, OnnxOutputs(x));
}

// The command line: kiln compile --input --fixed-input, kiln run of the
// artifact against kiln run of the .onnx file, the error, kiln inspect.
using Result = testing::KilnRun;
using testing::RunKiln;

void Write(const std::string& path, const HostTensor& t) {
  ASSERT_TRUE(WriteNpy(path, t.type.dtype, t.type.dims, t.bytes.data(), t.bytes.size()).ok()) << path;
}

TEST(OnnxArtifactFixedInputs, CompileRunAndInspectOnTheCommandLine) {
  const std::string dir = testing::MakeTempDir();
  const std::string onnx = OnnxTestModel("fixed_inputs.onnx");
  const OnnxSessionOptions fixed = FixedWAndShape();
  Write(dir + "/w.npy", fixed.fixed_inputs.at("w"));
  Write(dir + "/shape.npy", fixed.fixed_inputs.at("shape"));
  Write(dir + "/x.npy", RandomFloats({4, 64}, 21));
  const std::string artifact = dir + "/m.kiln";
  Result c = RunKiln({"compile", onnx, "--input", "w=" + dir + "/w.npy", "--input", "shape=" + dir + "/shape.npy",
                      "--fixed-input", "w", "--fixed-input", "shape", "-o", artifact});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  Result a = RunKiln({"run", onnx, "--input", "x=" + dir + "/x.npy", "--input", "w=" + dir + "/w.npy", "--input",
                      "shape=" + dir + "/shape.npy", "--fixed-input", "w", "--fixed-input", "shape", "--output-dir",
                      dir + "/a"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  Result b = RunKiln({"run", artifact, "--input", "x=" + dir + "/x.npy", "--output-dir", dir + "/b"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string y = testing::ReadFileBytes(dir + "/a/y.npy");
  EXPECT_FALSE(y.empty());
  EXPECT_TRUE(y == testing::ReadFileBytes(dir + "/b/y.npy")) << "the artifact's output differs from the .onnx file's";

  Result given = RunKiln({"run", artifact, "--input", "x=" + dir + "/x.npy", "--input", "shape=" + dir + "/shape.npy",
                          "--output-dir", dir + "/c"});
  EXPECT_EQ(given.exit_code, 1);
  EXPECT_NE(given.err.find("input shape: its value was fixed when the artifact was compiled"), std::string::npos)
      << given.err;

  // An --input that is not fixed has nowhere to go in an artifact.
  Result loose = RunKiln({"compile", onnx, "--input", "x=" + dir + "/x.npy", "--input", "w=" + dir + "/w.npy",
                          "--input", "shape=" + dir + "/shape.npy", "--fixed-input", "w", "--fixed-input", "shape",
                          "-o", dir + "/loose.kiln"});
  EXPECT_EQ(loose.exit_code, 1);
  EXPECT_NE(loose.err.find("--input x"), std::string::npos) << loose.err;

  Result inspect = RunKiln({"inspect", artifact});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("--fixed-input shape --fixed-input w"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("fixed input (its value stored): w f32[64,32]"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("input: x f32[4,64]"), std::string::npos) << inspect.out;
}

}  // namespace onnx_artifact_fixed_inputs_tests
}  // namespace kiln
