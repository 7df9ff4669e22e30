// `--precision mixed` compiled into an ONNX artifact: the bf16 products'
// weights (a convolution's, a MatMul's and a Gemm's, rounded to bf16 in the
// format oneDNN picked) are stored like the fp32 layouts and taken from the
// file at load, none laid out again; the outputs equal the .onnx file's run
// with --precision mixed bit for bit; and a CPU that multiplies no bf16
// finds the artifact stale (refused, or rebuilt on request) rather than
// running products the compiled plan had in bf16 in fp32. Where the CPU has
// no AVX-512 BF16, oneDNN's emulation on AVX-512 runs the bf16 path
// (KILN_BF16_PRODUCTS=emulated); below AVX-512 the test is skipped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <set>

#include "backend/backend.h"
#include "format/artifact_file.h"
#include "onnx/onnx_artifact.h"
#include "onnx/onnx_session.h"
#include "onnx_test_models.h"
#include "testing/test_paths.h"

namespace kiln {
namespace onnx_artifact_bf16_tests {

using testing::OnnxTestModel;

// KILN_BF16_PRODUCTS=emulated while it lives (as it was after).
class EmulatedBf16 {
 public:
  EmulatedBf16() {
    const char* was = std::getenv("KILN_BF16_PRODUCTS");
    had_ = was != nullptr;
    if (had_) was_ = was;
    ::setenv("KILN_BF16_PRODUCTS", "emulated", 1);
  }
  ~EmulatedBf16() {
    if (had_) {
      ::setenv("KILN_BF16_PRODUCTS", was_.c_str(), 1);
    } else {
      ::unsetenv("KILN_BF16_PRODUCTS");
    }
  }

 private:
  bool had_ = false;
  std::string was_;
};

std::map<std::string, HostTensor> RandomImage(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  HostTensor t(TensorType{DType::kF32, {1, 16, 32, 32}});
  for (size_t k = 0; k < t.bytes.size() / 4; ++k) t.data<float>()[k] = normal(rng);
  return {{"x", std::move(t)}};
}

std::vector<HostTensor> RunOnce(const std::string& path, const OnnxSessionOptions& options) {
  auto session = OnnxSession::Load(path, options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  auto out = (*session)->Run(RandomImage(3));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(*out) : std::vector<HostTensor>{};
}

void ExpectSameBytes(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  for (size_t j = 0; j < got.size(); ++j) {
    EXPECT_EQ(got[j].type, want[j].type);
    EXPECT_TRUE(got[j].bytes == want[j].bytes) << "output " << j << " differs";
  }
}

TEST(OnnxArtifactBf16, MixedPrecisionProductsAreStoredAndTakenFromTheFile) {
  const bool native = BackendRegistry::Get().cpu().has_bf16_tensor_products();
  EmulatedBf16 emulated;
  if (!BackendRegistry::Get().cpu().has_bf16_tensor_products()) {
    GTEST_SKIP() << "no bf16 products below AVX-512 (KILN_ISA caps it)";
  }
  const std::string onnx = OnnxTestModel("bf16_products.onnx");
  OnnxSessionOptions mixed;
  mixed.precision = Precision::kMixed;
  const std::string artifact = testing::MakeTempDir() + "/bf16_products.kiln";
  auto summary = CompileOnnxArtifact(onnx, mixed, artifact);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();

  // The three products ran in bf16, and their oneDNN bf16 weights are stored.
  auto opened = OpenOnnxArtifact(artifact, {});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->metadata.at("bf16_products").get<int>(), 3);
  std::set<std::string> bf16_nodes;
  for (const auto& e : opened->metadata.at("laid_out")) {
    if (e.at("layout").get<std::string>().rfind("onednn:", 0) == 0) bf16_nodes.insert(e.at("node").get<std::string>());
  }
  EXPECT_EQ(bf16_nodes, (std::set<std::string>{"conv", "matmul", "gemm"}));

  // Bit for bit the .onnx file's outputs under --precision mixed, with every
  // stored constant taken from the file and none laid out again.
  ExpectSameBytes(RunOnce(artifact, {}), RunOnce(onnx, mixed));
  auto loaded = OnnxSession::Load(artifact);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const LaidOutWeights& laid_out = *(*loaded)->options().laid_out;
  EXPECT_EQ(laid_out.adopted(), static_cast<int>(opened->metadata.at("laid_out").size()));
  EXPECT_GE(laid_out.adopted(), 3);
  EXPECT_EQ(laid_out.laid_out(), 0) << "a bf16 product laid its weights out again";
  if (native) return;

  // Without bf16 products (no emulation asked for, no AVX-512 BF16), the
  // same options compile them in fp32: the artifact is stale.
  ::unsetenv("KILN_BF16_PRODUCTS");
  auto refused = OnnxSession::Load(artifact);
  ASSERT_FALSE(refused.ok());
  const std::string message = refused.status().ToString();
  EXPECT_NE(message.find("3 products in bf16"), std::string::npos) << message;
  EXPECT_NE(message.find("--precision mixed"), std::string::npos) << message;
  OnnxSessionOptions rebuild;
  rebuild.recompile_if_stale = true;
  auto rebuilt = OnnxSession::Load(artifact, rebuild);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  auto reopened = OpenOnnxArtifact(artifact, {});
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(reopened->metadata.at("bf16_products").get<int>(), 0);
  ExpectSameBytes(RunOnce(artifact, {}), RunOnce(onnx, mixed));
}

}  // namespace onnx_artifact_bf16_tests
}  // namespace kiln
