// ONNX graphs compiled into .kiln artifacts (onnx/onnx_artifact.h): the
// artifact's outputs equal the .onnx file's bit for bit (same kernels, same
// weights), a convolutional net's artifact loads with every convolution's
// weights (and each MatMul's and Gemm's packed panels) taken from the file
// in their kernels' layouts (none laid out again), an --input-shape that disagrees with the compiled one is an error
// naming both, and a flipped byte or a truncated file is refused. The graph
// is stored apart from its weights, which are used where they are mapped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "backend/cpu/kernels/isa.h"
#include "format/artifact_file.h"
#include "compiler/compiled_tensor_graph.h"
#include "onnx/onnx_artifact.h"
#include "onnx/onnx_session.h"
#include "onnx_test_models.h"
#include "testing/artifact_edit_for_tests.h"
#include "testing/kiln_command_for_tests.h"
#include "testing/test_paths.h"

namespace kiln {
namespace onnx_artifact_tests {

using testing::OnnxTestModel;

std::string Compile(const std::string& model, const OnnxSessionOptions& options, const std::string& name) {
  const std::string out = testing::MakeTempDir() + "/" + name;
  auto summary = CompileOnnxArtifact(model, options, out);
  EXPECT_TRUE(summary.ok()) << summary.status().ToString();
  return out;
}

std::map<std::string, HostTensor> RandomInputs(const OnnxSession& session, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::map<std::string, HostTensor> inputs;
  for (const OnnxTensorInfo& i : session.inputs()) {
    HostTensor t(TensorType{i.dtype, i.dims});
    for (size_t k = 0; k < t.bytes.size() / 4; ++k) t.data<float>()[k] = normal(rng);
    inputs.emplace(i.name, std::move(t));
  }
  return inputs;
}

// Runs the .onnx file and its artifact on the same inputs: equal bytes.
void ExpectSameOutputs(const std::string& onnx, const std::string& artifact, const OnnxSessionOptions& options) {
  auto a = OnnxSession::Load(onnx, options);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = OnnxSession::Load(artifact);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const auto inputs = RandomInputs(**a, 7);
  auto x = (*a)->Run(inputs);
  auto y = (*b)->Run(inputs);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ASSERT_EQ(x->size(), y->size());
  for (size_t j = 0; j < x->size(); ++j) {
    EXPECT_EQ((*x)[j].type, (*y)[j].type);
    EXPECT_TRUE((*x)[j].bytes == (*y)[j].bytes) << "output " << j << " differs";
  }
}

// Loads `artifact`: every constant a kernel lays out comes from it, in a
// page-aligned section, none laid out again; at least `at_least` of them
// where the kernels lay weights out (the scalar ones, under
// KILN_ISA=scalar, read them as they are).
void ExpectNothingLaidOutAgain(const std::string& artifact, int at_least) {
  auto loaded = OnnxSession::Load(artifact);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const LaidOutWeights* laid_out = (*loaded)->options().laid_out.get();
  ASSERT_NE(laid_out, nullptr);
  EXPECT_GE(laid_out->adopted(), cpu::BestIsa() == cpu::Isa::kScalar ? 0 : at_least);
  EXPECT_EQ(laid_out->laid_out(), 0) << "every convolution's weights come from the artifact";
  auto file = ArtifactFile::Open(artifact);
  ASSERT_TRUE(file.ok());
  int stored = 0;
  for (const ArtifactSection& s : (*file)->sections()) {
    if (s.name.rfind("w.", 0) == 0) {
      ++stored;
      EXPECT_EQ(s.offset % kArtifactAlignment, 0u) << s.name;
    }
  }
  EXPECT_EQ(laid_out->adopted(), stored);
}

// The compiled graph of a session over `artifact` at its inputs' shapes.
const CompiledTensorGraph* CompiledAtItsShapes(OnnxSession& session) {
  std::vector<TensorType> types;
  for (const OnnxTensorInfo& i : session.inputs()) types.push_back(TensorType{i.dtype, i.dims});
  auto compiled = session.Compiled(types);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return compiled.ok() ? *compiled : nullptr;
}

// Loading `artifact` binds its stored graph and plan (no stage runs), whose
// constants of 1 KiB or more are used where the file is mapped: the
// model's initializers in onnx.w, what the stages made in onnx.c.
void ExpectBoundFromTheStoredGraph(const std::string& artifact) {
  auto opened = OpenOnnxArtifact(artifact, {});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const std::shared_ptr<const ArtifactFile> file = opened->file;
  auto loaded = OnnxSession::FromArtifact(std::move(opened).value(), artifact);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const CompiledTensorGraph* compiled = CompiledAtItsShapes(**loaded);
  ASSERT_NE(compiled, nullptr);
  EXPECT_TRUE(compiled->report().from_artifact) << artifact << ": the stages ran at load";
  const ArtifactSection* w = file->Find("onnx.w");
  const ArtifactSection* c = file->Find("onnx.c");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(c, nullptr);
  auto inside = [](const ArtifactSection* s, const TensorData& t) {
    return t.data() >= s->data && t.data() + t.bytes() <= s->data + s->bytes;
  };
  int large = 0;
  for (const Value& v : compiled->graph().values()) {
    if (v.constant == nullptr || v.constant->bytes() < 1024) continue;
    ++large;
    EXPECT_TRUE(inside(w, *v.constant) || inside(c, *v.constant)) << v.name << " was copied out of the file";
  }
  EXPECT_GE(large, 1);
}

// KILN_ARTIFACT_PLANS=recompile runs the stages at load, as for a file
// without a stored graph: the same outputs.
TEST(OnnxArtifact, TheStagesRunAgainOnlyWhenAsked) {
  const std::string onnx = OnnxTestModel("conv_net.onnx");
  const std::string artifact = Compile(onnx, {}, "conv_net.recompile.kiln");
  ::setenv("KILN_ARTIFACT_PLANS", "recompile", 1);
  auto loaded = OnnxSession::Load(artifact);
  ::unsetenv("KILN_ARTIFACT_PLANS");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const CompiledTensorGraph* compiled = CompiledAtItsShapes(**loaded);
  ASSERT_NE(compiled, nullptr);
  EXPECT_FALSE(compiled->report().from_artifact);
  auto bound = OnnxSession::Load(artifact);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  const auto inputs = RandomInputs(**loaded, 3);
  auto x = (*loaded)->Run(inputs);
  auto y = (*bound)->Run(inputs);
  ASSERT_TRUE(x.ok() && y.ok());
  for (size_t j = 0; j < x->size(); ++j) EXPECT_TRUE((*x)[j].bytes == (*y)[j].bytes) << "output " << j;
  // Unfused (kiln diff's way) is another compilation: the stages run.
  OnnxSessionOptions unfused;
  unfused.fuse = false;
  auto diff = OnnxSession::Load(artifact, unfused);
  ASSERT_TRUE(diff.ok()) << diff.status().ToString();
  compiled = CompiledAtItsShapes(**diff);
  ASSERT_NE(compiled, nullptr);
  EXPECT_FALSE(compiled->report().from_artifact);
}

TEST(OnnxArtifact, ConvNetOutputsEqualTheOnnxFileAndNothingIsLaidOutAgain) {
  const std::string onnx = OnnxTestModel("conv_net.onnx");
  const std::string artifact = Compile(onnx, {}, "conv_net.kiln");
  ExpectSameOutputs(onnx, artifact, {});
  // The stem and the dense layers at least (the depthwise one is read as it is).
  ExpectNothingLaidOutAgain(artifact, 3);
  ExpectBoundFromTheStoredGraph(artifact);
  // The classifier's Gemm takes its packed panels from the file too.
  auto opened = OpenOnnxArtifact(artifact, {});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  int panels = 0;
  for (const auto& e : opened->metadata.at("laid_out")) {
    const std::string layout = e.at("layout").get<std::string>();
    panels += layout == "kiln-gemm-panels" || layout == "kiln-matmul-panels";
  }
  EXPECT_GE(panels, 1);
}

// The artifact stores the graph apart from its weights: the graph section is
// a small fraction of the .onnx file, and every initializer of 1 KiB or
// more is read where the weights section is mapped, at a 64-byte boundary,
// instead of being copied out of it.
void ExpectWeightsMappedInPlace(const std::string& artifact, uintmax_t source_bytes) {
  auto opened = OpenOnnxArtifact(artifact, {});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const ArtifactSection* weights = opened->file->Find("onnx.w");
  const ArtifactSection* graph = opened->file->Find("onnx.model");
  ASSERT_NE(weights, nullptr);
  ASSERT_NE(graph, nullptr);
  EXPECT_LT(graph->bytes * 4, source_bytes) << "the graph section still holds the weights";
  int in_place = 0;
  for (const OnnxTensor& t : opened->model.graph.initializers) {
    if (t.data.size() < 1024) continue;
    const uint8_t* p = t.data.data();
    EXPECT_TRUE(p >= weights->data && p + t.data.size() <= weights->data + weights->bytes)
        << t.name << " was copied out of the mapped file";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << t.name;
    ++in_place;
  }
  EXPECT_GE(in_place, 1);
  EXPECT_EQ(opened->metadata.at("weights_moved").get<int>(), in_place);
  for (const ArtifactSection& s : opened->file->sections()) {
    EXPECT_NE(s.name.rfind("onnx.x.", 0), 0u) << s.name << ": every external initializer moved into onnx.w";
  }
}

TEST(OnnxArtifact, TheGraphIsStoredApartFromItsWeightsWhichAreMappedInPlace) {
  namespace fs = std::filesystem;
  const std::string onnx = OnnxTestModel("conv_net.onnx");
  const std::string artifact = Compile(onnx, {}, "conv_net.split.kiln");
  ExpectWeightsMappedInPlace(artifact, fs::file_size(onnx));
  ExpectSameOutputs(onnx, artifact, {});
  // The weights of an external data file move too: the file is not stored.
  const std::string external = OnnxTestModel("conv_net_external.onnx");
  const std::string external_artifact = Compile(external, {}, "conv_net_external.split.kiln");
  ExpectWeightsMappedInPlace(external_artifact,
                             fs::file_size(external) + fs::file_size(OnnxTestModel("conv_net_external.bin")));
  ExpectSameOutputs(external, external_artifact, {});
}

TEST(OnnxArtifact, GroupedConvolutionsOnKilnsPanels) {
  const std::string onnx = OnnxTestModel("grouped_conv.onnx");
  const std::string artifact = Compile(onnx, {}, "grouped_conv.kiln");
  ExpectSameOutputs(onnx, artifact, {});
  ExpectNothingLaidOutAgain(artifact, 2);
}

TEST(OnnxArtifact, TransposedConvolutionsAndQuantizedProductsTakeTheirPackedWeights) {
  const std::string up = OnnxTestModel("conv_transpose.onnx");
  const std::string up_artifact = Compile(up, {}, "conv_transpose.kiln");
  ExpectSameOutputs(up, up_artifact, {});
  ExpectNothingLaidOutAgain(up_artifact, 1);
  ExpectBoundFromTheStoredGraph(up_artifact);
  // QLinearConv's two groups and QLinearMatMul: int8 panels and column sums.
  const std::string quantized = OnnxTestModel("quantized_products.onnx");
  const std::string quantized_artifact = Compile(quantized, {}, "quantized_products.kiln");
  ExpectSameOutputs(quantized, quantized_artifact, {});
  ExpectNothingLaidOutAgain(quantized_artifact, 6);
  ExpectBoundFromTheStoredGraph(quantized_artifact);
}

TEST(OnnxArtifact, ExternalDataAndABatchFixedAtCompileTime) {
  const std::string external = OnnxTestModel("conv_net_external.onnx");
  ExpectSameOutputs(external, Compile(external, {}, "conv_net_external.kiln"), {});
  OnnxSessionOptions batch;
  batch.input_shapes["image"] = {2, 3, 8, 8};
  const std::string tiny = OnnxTestModel("torch_tiny.onnx");
  ExpectSameOutputs(tiny, Compile(tiny, batch, "torch_tiny.kiln"), batch);
}

TEST(OnnxArtifact, AnOpenDimensionIsCompiledPerShapeAtRunTime) {
  const std::string tiny = OnnxTestModel("torch_tiny.onnx");
  const std::string artifact = Compile(tiny, {}, "torch_tiny_open.kiln");
  OnnxSessionOptions batch;
  batch.input_shapes["image"] = {3, 3, 8, 8};
  ExpectSameOutputs(tiny, artifact, batch);
  auto loaded = OnnxSession::Load(artifact, batch);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->inputs()[0].dims, (std::vector<int64_t>{3, 3, 8, 8}));
  EXPECT_EQ((*loaded)->options().laid_out->adopted(), 0) << "nothing was compiled, so nothing is stored";

  // Compiled once at a sample shape, the input stays open and another
  // batch takes the stored convolution layout.
  const std::string sampled = testing::MakeTempDir() + "/torch_tiny_sampled.kiln";
  auto summary = CompileOnnxArtifact(tiny, {}, sampled, {{"image", {2, 3, 8, 8}}});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_GE(summary->laid_out, 1);
  ExpectSameOutputs(tiny, sampled, batch);
  auto other = OnnxSession::Load(sampled, batch);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE((*other)->Run(RandomInputs(**other, 3)).ok());
  EXPECT_EQ((*other)->options().laid_out->adopted(), summary->laid_out);
  EXPECT_EQ((*other)->options().laid_out->laid_out(), 0);
  const CompiledTensorGraph* compiled = CompiledAtItsShapes(**other);
  ASSERT_NE(compiled, nullptr);
  EXPECT_FALSE(compiled->report().from_artifact) << "another shape compiles from the graph";
  // At the sample shape, the graph compiled then is bound.
  OnnxSessionOptions at_sample;
  at_sample.input_shapes["image"] = {2, 3, 8, 8};
  ExpectSameOutputs(tiny, sampled, at_sample);
  auto same = OnnxSession::Load(sampled, at_sample);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  compiled = CompiledAtItsShapes(**same);
  ASSERT_NE(compiled, nullptr);
  EXPECT_TRUE(compiled->report().from_artifact);
}

// Shape buckets of an open input are compiled and stored too: a run at any
// of them binds its stored graph, equal to the .onnx file's; another shape
// compiles from the graph. The stages' constants are stored once.
TEST(OnnxArtifact, ShapeBucketsOfAnOpenInputAreStoredAndBound) {
  const std::string tiny = OnnxTestModel("torch_tiny.onnx");
  const std::string artifact = testing::MakeTempDir() + "/torch_tiny_buckets.kiln";
  auto summary =
      CompileOnnxArtifact(tiny, {}, artifact, {{"image", {1, 3, 8, 8}}}, {{{"image", {2, 3, 8, 8}}}, {{"image", {4, 3, 8, 8}}}});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  auto opened = OpenOnnxArtifact(artifact, {});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_EQ(opened->metadata.at("compiled").size(), 3u);
  EXPECT_EQ(opened->metadata.at("shape_buckets").size(), 2u);
  for (int64_t batch : {1, 2, 3, 4}) {
    OnnxSessionOptions shape;
    shape.input_shapes["image"] = {batch, 3, 8, 8};
    ExpectSameOutputs(tiny, artifact, shape);
    auto loaded = OnnxSession::Load(artifact, shape);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    const CompiledTensorGraph* compiled = CompiledAtItsShapes(**loaded);
    ASSERT_NE(compiled, nullptr);
    EXPECT_EQ(compiled->report().from_artifact, batch != 3) << "batch " << batch;
  }
}

// The same from the command line: --shape-bucket next to --sample-shape,
// and kiln inspect listing the stored graphs; alone it is an error.
TEST(OnnxArtifact, ShapeBucketsOnTheCommandLine) {
  const std::string tiny = OnnxTestModel("torch_tiny.onnx");
  const std::string artifact = testing::MakeTempDir() + "/torch_tiny_cli_buckets.kiln";
  testing::KilnRun c = testing::RunKiln({"compile", tiny, "--sample-shape", "image:1,3,8,8", "--shape-bucket",
                                         "image:2,3,8,8", "-o", artifact});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  testing::KilnRun shown = testing::RunKiln({"inspect", artifact});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("compiled graphs and plans: 2 "), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("inputs f32[2,3,8,8]"), std::string::npos) << shown.out;
  testing::KilnRun alone =
      testing::RunKiln({"compile", tiny, "--shape-bucket", "image:2,3,8,8", "-o", artifact + ".2"});
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_NE(alone.err.find("--shape-bucket: give --sample-shape too"), std::string::npos) << alone.err;
}

TEST(OnnxArtifact, AnInputShapeOtherThanTheCompiledOneIsAnError) {
  OnnxSessionOptions batch;
  batch.input_shapes["image"] = {2, 3, 8, 8};
  const std::string artifact = Compile(OnnxTestModel("torch_tiny.onnx"), batch, "torch_tiny_b2.kiln");
  OnnxSessionOptions other;
  other.input_shapes["image"] = {4, 3, 8, 8};
  auto loaded = OnnxSession::Load(artifact, other);
  ASSERT_FALSE(loaded.ok());
  const std::string message = loaded.status().ToString();
  EXPECT_NE(message.find("image:4,3,8,8"), std::string::npos) << message;
  EXPECT_NE(message.find("image:2,3,8,8"), std::string::npos) << message;
  other.input_shapes = {{"pixels", {2, 3, 8, 8}}};
  auto unknown = OnnxSession::Load(artifact, other);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().ToString().find("pixels"), std::string::npos) << unknown.status().ToString();
  OnnxSessionOptions precision;
  precision.precision = Precision::kBf16;
  auto refused = OnnxSession::Load(artifact, precision);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("--precision"), std::string::npos) << refused.status().ToString();
}

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(OnnxArtifact, AFlippedOrMissingByteIsRefused) {
  const std::string artifact = Compile(OnnxTestModel("conv_net.onnx"), {}, "conv_net_corrupt.kiln");
  auto file = ArtifactFile::Open(artifact);
  ASSERT_TRUE(file.ok());
  const std::vector<char> good = ReadAll(artifact);
  const std::string bad = artifact + ".bad.kiln";
  // The graph and the metadata are checked at every load.
  for (const char* section : {"onnx.model", "metadata", "plan"}) {
    const ArtifactSection* s = (*file)->Find(section);
    ASSERT_NE(s, nullptr) << section;
    std::vector<char> flipped = good;
    flipped[s->offset + s->bytes / 2] ^= 0x10;
    WriteAll(bad, flipped);
    auto loaded = OnnxSession::Load(bad);
    ASSERT_FALSE(loaded.ok()) << section;
    EXPECT_NE(loaded.status().ToString().find(section), std::string::npos) << loaded.status().ToString();
  }
  // A laid-out weight is checked on request (kiln inspect --verify).
  const ArtifactSection* w = (*file)->Find("w.0");
  ASSERT_NE(w, nullptr);
  std::vector<char> flipped = good;
  flipped[w->offset + 3] ^= 0x01;
  WriteAll(bad, flipped);
  auto opened = ArtifactFile::Open(bad);
  ASSERT_TRUE(opened.ok());
  Status verified = (*opened)->VerifyAll();
  ASSERT_FALSE(verified.ok());
  EXPECT_NE(verified.ToString().find("w.0"), std::string::npos) << verified.ToString();
  // So are the graph's weights: mapped and used as they lie, they are
  // checked with verify_weights (--verify-weights), not at every load.
  const ArtifactSection* weights = (*file)->Find("onnx.w");
  ASSERT_NE(weights, nullptr);
  flipped = good;
  flipped[weights->offset + weights->bytes / 2] ^= 0x01;
  WriteAll(bad, flipped);
  EXPECT_TRUE(OnnxSession::Load(bad).ok());
  OnnxSessionOptions verify;
  verify.verify_weights = true;
  auto refused = OnnxSession::Load(bad, verify);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("onnx.w"), std::string::npos) << refused.status().ToString();
  EXPECT_TRUE(OnnxSession::Load(artifact, verify).ok());
  // Truncated.
  WriteAll(bad, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  auto truncated = OnnxSession::Load(bad);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().ToString().find("truncated"), std::string::npos) << truncated.status().ToString();
}

TEST(OnnxArtifact, AStaleFileIsRefusedAndRebuiltOnRequest) {
  const std::string onnx = OnnxTestModel("conv_net.onnx");
  const std::string artifact = Compile(onnx, {}, "conv_net_stale.kiln");
  // The same file with another kernel-layout version in its metadata.
  const std::string stale = artifact + ".stale.kiln";
  testing::RewriteArtifactMetadata(artifact, stale, testing::BumpKernelLayoutVersion);
  auto refused = OnnxSession::Load(stale);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("kernel-layout version"), std::string::npos)
      << refused.status().ToString();
  OnnxSessionOptions rebuild;
  rebuild.recompile_if_stale = true;
  auto rebuilt = OnnxSession::Load(stale, rebuild);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_EQ((*rebuilt)->options().laid_out->laid_out(), 0);
  EXPECT_TRUE(OnnxSession::Load(stale).ok());
}

}  // namespace onnx_artifact_tests
}  // namespace kiln
