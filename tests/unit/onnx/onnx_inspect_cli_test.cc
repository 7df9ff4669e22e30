// End to end: `kiln inspect MODEL.onnx` prints the graph's summary, and a
// bad file's error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "onnx_test_models.h"
#include "testing/test_paths.h"

namespace kiln {
namespace onnx_inspect_cli_tests {

using ::testing::HasSubstr;

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CliRun Inspect(const std::string& args) {
  std::string command = testing::KilnBinary() + " inspect " + args + " 2>&1";
  CliRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(OnnxInspectCli, PrintsTheGraphSummary) {
  CliRun run = Inspect("'" + testing::OnnxTestModel("basic.onnx") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("format: onnx (IR version 8)"));
  EXPECT_THAT(run.output, HasSubstr("producer: kiln-tests 1.0"));
  EXPECT_THAT(run.output, HasSubstr("opsets: ai.onnx 13\n"));
  EXPECT_THAT(run.output, HasSubstr("  images: f32 [batch, 3, 4, 4]\n"));
  EXPECT_THAT(run.output, HasSubstr("  mask: bool [?, 2]\n"));
  EXPECT_THAT(run.output, HasSubstr("  mask_out: bool shape unknown\n"));
  EXPECT_THAT(run.output, HasSubstr("nodes: 6\n"));
  EXPECT_THAT(run.output,
              HasSubstr("op types: Constant 1, Conv 1, Identity 1, LeakyRelu 1, Relu 1, Reshape 1\n"));
  // 24 + 8 + 16 + 6 + 4 + 12 + 16 + 3 + 3 + 2 + 4 + 0 bytes.
  EXPECT_THAT(
      run.output,
      HasSubstr("initializers: 12 tensors, 98 bytes (bool 1, f16 2, f32 4, i32 2, i64 1, i8 1, u8 1)"));
}

TEST(OnnxInspectCli, InputShapeFixesSymbolicDims) {
  CliRun run = Inspect("'" + testing::OnnxTestModel("basic.onnx") + "' --input-shape images:2,3,4,4");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("  images: f32 [2, 3, 4, 4]\n"));
}

TEST(OnnxInspectCli, CountsSubgraphNodes) {
  CliRun run = Inspect("'" + testing::OnnxTestModel("if_subgraph.onnx") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("nodes: 4 (2 in subgraphs)\n"));
  EXPECT_THAT(run.output, HasSubstr("op types: Add 1, If 1, Mul 1, Neg 1\n"));
}

TEST(OnnxInspectCli, BadFileIsAnErrorNamingTheNode) {
  CliRun run = Inspect("'" + testing::OnnxTestModel("missing_initializer.onnx") + "'");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("node 'fc' (MatMul)"));
  EXPECT_THAT(run.output, HasSubstr("'fc.weight'"));
}

}  // namespace onnx_inspect_cli_tests
}  // namespace kiln

namespace kiln {
namespace onnx_inspect_cli_tests {

// --precision on an ONNX plan: fp32 by default; bf16 marks the products
// (or says why they stay fp32 on a CPU without native bf16); a bad value is
// an error naming the flag.
TEST(OnnxInspectCli, PlanShowsThePrecisionDecisions) {
  const std::string path = testing::OnnxTestModel("torch_tiny.onnx");
  if (!std::ifstream(path)) GTEST_SKIP() << "torch is not installed: no exported model";
  const std::string model = "'" + path + "' --plan --nodes --input-shape image:512,3,8,8";
  CliRun fp32 = Inspect(model);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  EXPECT_THAT(fp32.output, HasSubstr("precision fp32: every op computes in fp32"));
  CliRun bf16 = Inspect(model + " --precision bf16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  if (bf16.output.find("multiplies no bf16 natively") == std::string::npos) {
    EXPECT_THAT(bf16.output, HasSubstr("precision bf16: 1 kiln.FusedConv in bf16"));
    EXPECT_THAT(bf16.output, HasSubstr("precision fp32: 1 Gemm: under 5 MFLOP"));
    EXPECT_THAT(bf16.output, HasSubstr("(fused /Relu)  [bf16 products]"));
  } else {
    EXPECT_THAT(bf16.output, HasSubstr("kiln.FusedConv: this CPU multiplies no bf16 natively"));
  }
  CliRun bad = Inspect(model + " --precision fp8");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("--precision: precision 'fp8': expected fp32, mixed or bf16"));
}

}  // namespace onnx_inspect_cli_tests
}  // namespace kiln
