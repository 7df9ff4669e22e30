// The ONNX reader on broken or hostile files: each gets a Status naming what
// is wrong (the node or tensor), never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "onnx/onnx_reader.h"
#include "onnx_test_models.h"
#include "testing/test_paths.h"

namespace kiln {
namespace onnx_bad_files_tests {

using testing::OnnxTestModel;

Status ReadError(const std::string& name, const OnnxReadOptions& options = {}) {
  Expected<OnnxModel> m = ReadOnnxModel(OnnxTestModel(name), options);
  EXPECT_FALSE(m.ok()) << name << " was read without an error";
  return m.status();
}

std::string Bytes(const std::string& name) {
  std::ifstream in(OnnxTestModel(name), std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

MATCHER_P(Mentions, text, "") {
  return arg.find(text) != std::string::npos;
}

TEST(OnnxBadFiles, TruncatedFile) {
  std::string bytes = Bytes("basic.onnx");
  for (size_t keep : {bytes.size() / 2, bytes.size() - 1, size_t{7}}) {
    Expected<OnnxModel> m = ParseOnnxModel(bytes.data(), keep, "");
    ASSERT_FALSE(m.ok()) << "kept " << keep << " bytes";
    EXPECT_EQ(m.status().code(), StatusCode::kCorrupt);
  }
  Expected<OnnxModel> half = ParseOnnxModel(bytes.data(), bytes.size() / 2, "");
  EXPECT_THAT(half.status().message(), Mentions("truncated"));
}

TEST(OnnxBadFiles, RandomBytes) {
  std::mt19937 rng(16);
  for (int trial = 0; trial < 50; ++trial) {
    std::string bytes(1 + rng() % 4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    Expected<OnnxModel> m = ParseOnnxModel(bytes.data(), bytes.size(), "");
    EXPECT_FALSE(m.ok());
  }
  std::string text = "this is a text file, not a model\n";
  Expected<OnnxModel> m = ParseOnnxModel(text.data(), text.size(), "");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), Mentions("ONNX"));
}

TEST(OnnxBadFiles, EmptyFileIsNotAModel) {
  Expected<OnnxModel> m = ParseOnnxModel("", 0, "");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), Mentions("no graph"));
}

TEST(OnnxBadFiles, NoOperatorSetImported) {
  // ir_version 8, a producer, an empty graph and no opset_import (a fuzzer's
  // find): the format requires at least one import.
  const std::string bytes("\x08\x08\x12\x0akiln-tests\x1a\x03" "0.0:\x00", 21);
  Expected<OnnxModel> m = ParseOnnxModel(bytes.data(), bytes.size(), "");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), Mentions("opset_import"));
}

TEST(OnnxBadFiles, Cycle) {
  Status s = ReadError("cycle.onnx");
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_THAT(s.message(), Mentions("cycle"));
  EXPECT_THAT(s.message(), Mentions("node 'cyc_a' (Add)"));
  EXPECT_THAT(s.message(), Mentions("node 'cyc_b' (Relu)"));
}

TEST(OnnxBadFiles, MissingInitializer) {
  Status s = ReadError("missing_initializer.onnx");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), Mentions("node 'fc' (MatMul)"));
  EXPECT_THAT(s.message(), Mentions("'fc.weight'"));
}

TEST(OnnxBadFiles, MissingValueInASubgraph) {
  Status s = ReadError("subgraph_missing.onnx");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              Mentions("node 'then_add' (Add) in the subgraph 'then_branch' of node 'branch' (If) "
                       "takes the input 'ghost'"));
}

TEST(OnnxBadFiles, GraphOutputNothingProduces) {
  Status s = ReadError("missing_output.onnx");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), Mentions("graph output 'y' is produced by no node"));
}

TEST(OnnxBadFiles, InputWithoutShape) {
  Status s = ReadError("no_shape.onnx");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), Mentions("graph input 'x' has no shape"));
  EXPECT_THAT(s.message(), Mentions("--input-shape x:"));

  OnnxReadOptions options;
  options.input_shapes["x"] = {1, 2};
  Expected<OnnxModel> m = ReadOnnxModel(OnnxTestModel("no_shape.onnx"), options);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->graph.inputs[0].has_static_shape());
}

TEST(OnnxBadFiles, InputShapeOverrideThatDisagrees) {
  OnnxReadOptions rank;
  rank.input_shapes["images"] = {1, 3, 4};
  Status s = ReadError("basic.onnx", rank);
  EXPECT_THAT(s.message(), Mentions("'images' has 3 dimensions"));
  EXPECT_THAT(s.message(), Mentions("[batch, 3, 4, 4]"));

  OnnxReadOptions fixed;
  fixed.input_shapes["images"] = {1, 4, 4, 4};
  EXPECT_THAT(ReadError("basic.onnx", fixed).message(), Mentions("fixes it at 3"));

  OnnxReadOptions unknown;
  unknown.input_shapes["image"] = {1, 3, 4, 4};
  s = ReadError("basic.onnx", unknown);
  EXPECT_THAT(s.message(), Mentions("'image', which is not an input"));
  EXPECT_THAT(s.message(), Mentions("images, mask"));
}

TEST(OnnxBadFiles, InitializerDataSizeDoesNotMatchShape) {
  Status raw = ReadError("bad_raw_size.onnx");
  EXPECT_EQ(raw.code(), StatusCode::kCorrupt);
  EXPECT_THAT(raw.message(), Mentions("initializer 'bad.weight' holds 12 bytes"));
  EXPECT_THAT(raw.message(), Mentions("needs 16"));
  Status typed = ReadError("bad_typed_count.onnx");
  EXPECT_THAT(typed.message(), Mentions("initializer 'bad.bias' holds 3 values in float_data"));
}

TEST(OnnxBadFiles, OpFromUnknownDomain) {
  Status s = ReadError("unknown_domain.onnx");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.message(), Mentions("node 'frob' (Frobnicate)"));
  EXPECT_THAT(s.message(), Mentions("'com.example'"));
  Status unimported = ReadError("unimported_domain.onnx");
  EXPECT_THAT(unimported.message(), Mentions("node 'r' (Relu)"));
  EXPECT_THAT(unimported.message(), Mentions("does not import"));
}

TEST(OnnxBadFiles, OpsetOutsideTheSupportedRange) {
  for (const char* name : {"opset6.onnx", "opset18.onnx"}) {
    Status s = ReadError(name);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_THAT(s.message(), Mentions("opsets 7 through 17"));
  }
  EXPECT_THAT(ReadError("opset6.onnx").message(), Mentions("opset 6"));
}

TEST(OnnxBadFiles, DuplicateOutputNames) {
  Status s = ReadError("duplicate_output.onnx");
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_THAT(s.message(), Mentions("value 'y' is produced twice"));
  EXPECT_THAT(s.message(), Mentions("node 'first' (Relu)"));
  EXPECT_THAT(s.message(), Mentions("node 'second' (Neg)"));
}

TEST(OnnxBadFiles, UnsupportedElementType) {
  Status s = ReadError("string_input.onnx");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.message(), Mentions("graph input 'x' has element type STRING"));
}

TEST(OnnxBadFiles, FeaturesKilnDoesNotRead) {
  Status u64 = ReadError("uint64_initializer.onnx");
  EXPECT_EQ(u64.code(), StatusCode::kUnsupported);
  EXPECT_THAT(u64.message(), Mentions("initializer 'big' has element type UINT64"));
  Status fn = ReadError("local_function.onnx");
  EXPECT_EQ(fn.code(), StatusCode::kUnsupported);
  EXPECT_THAT(fn.message(), Mentions("local functions ('local.Twice')"));
  Status sparse = ReadError("sparse_initializer.onnx");
  EXPECT_EQ(sparse.code(), StatusCode::kUnsupported);
  EXPECT_THAT(sparse.message(), Mentions("sparse initializers"));
  Status seq = ReadError("sequence_input.onnx");
  EXPECT_EQ(seq.code(), StatusCode::kUnsupported);
  EXPECT_THAT(seq.message(), Mentions("graph input 'x' is a sequence"));
  Status tensors = ReadError("tensors_attribute.onnx");
  EXPECT_EQ(tensors.code(), StatusCode::kUnsupported);
  EXPECT_THAT(tensors.message(), Mentions("node 'listy' (Identity) attribute 'blobs' is of type TENSORS"));
}

TEST(OnnxBadFiles, TensorElementLimit) {
  Status s = ReadError("huge_tensor.onnx");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), Mentions("initializer 'huge'"));
  OnnxReadOptions small;
  small.limits.max_tensor_elements = 5;
  EXPECT_THAT(ReadError("basic.onnx", small).message(), Mentions("initializer 'conv.weight'"));
}

TEST(OnnxBadFiles, FileSizeLimit) {
  OnnxReadOptions small;
  small.limits.max_file_bytes = 100;
  Status s = ReadError("basic.onnx", small);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), Mentions("limit of 100"));
}

TEST(OnnxBadFiles, NodeCountLimit) {
  OnnxReadOptions small;
  small.limits.max_nodes = 3;
  Status s = ReadError("basic.onnx", small);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), Mentions("more than 3 nodes"));
}

TEST(OnnxBadFiles, MessageAndStringLimit) {
  OnnxReadOptions small;
  small.limits.max_proto_items = 10;
  Status s = ReadError("basic.onnx", small);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), Mentions("more than 10 messages and strings"));
}

// A length-delimited protobuf field.
std::string LenField(int field, const std::string& body) {
  std::string out;
  auto varint = [&out](uint64_t v) {
    for (; v >= 0x80; v >>= 7) out += static_cast<char>(v | 0x80);
    out += static_cast<char>(v);
  };
  varint(static_cast<uint64_t>(field) << 3 | 2);
  varint(body.size());
  return out + body;
}

TEST(OnnxBadFiles, MessagesNestedTooDeepForTheStack) {
  // graph { node { attribute { g: graph { ... } } } }, 500 levels: refused
  // while decoding, before the recursion could exhaust the stack.
  std::string graph;
  for (int i = 0; i < 500; ++i) graph = LenField(1, LenField(5, LenField(6, graph)));
  std::string model = LenField(7, graph);
  Expected<OnnxModel> m = ParseOnnxModel(model.data(), model.size(), "");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kCorrupt);
  EXPECT_THAT(m.status().message(), Mentions("nested too deep"));
}

TEST(OnnxBadFiles, NestingLimit) {
  OnnxReadOptions shallow;
  shallow.limits.max_graph_nesting = 2;
  Status s = ReadError("nested3.onnx", shallow);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), Mentions("node 'if3' (If) attribute"));
  EXPECT_THAT(s.message(), Mentions("node 'if1' (If) attribute"));
  EXPECT_THAT(s.message(), Mentions("deeper than 2"));
}

TEST(OnnxBadFiles, ExternalDataOutsideTheModelFolder) {
  Status escape = ReadError("ext_escape.onnx");
  EXPECT_EQ(escape.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(escape.message(), Mentions("initializer 'escape'"));
  EXPECT_THAT(escape.message(), Mentions("leaves the model's folder"));
  Status absolute = ReadError("ext_absolute.onnx");
  EXPECT_THAT(absolute.message(), Mentions("initializer 'abs'"));
  EXPECT_THAT(absolute.message(), Mentions("absolute path"));
}

TEST(OnnxBadFiles, ExternalDataThroughASymlinkLeavingTheFolder) {
  namespace fs = std::filesystem;
  fs::path dir = testing::MakeTempDir();
  fs::copy_file(OnnxTestModel("external.onnx"), dir / "external.onnx");
  fs::create_symlink(OnnxTestModel("weights.bin"), dir / "weights.bin");
  Expected<OnnxModel> m = ReadOnnxModel((dir / "external.onnx").string());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), Mentions("initializer 'a': external data location 'weights.bin' leaves"));
}

TEST(OnnxBadFiles, ExternalDataOutOfBoundsOrWrongLength) {
  Status beyond = ReadError("ext_beyond.onnx");
  EXPECT_EQ(beyond.code(), StatusCode::kCorrupt);
  EXPECT_THAT(beyond.message(), Mentions("initializer 'beyond'"));
  EXPECT_THAT(beyond.message(), Mentions("beyond the end of 'weights.bin'"));
  Status length = ReadError("ext_wrong_length.onnx");
  EXPECT_THAT(length.message(), Mentions("initializer 'wrong_len': external data length 40"));
  Status missing = ReadError("ext_missing_file.onnx");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), Mentions("no_such_file.bin"));
}

TEST(OnnxBadFiles, ExternalDataNeedsAFolderWhenParsedFromMemory) {
  std::string bytes = Bytes("external.onnx");
  Expected<OnnxModel> m = ParseOnnxModel(bytes.data(), bytes.size(), "");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), Mentions("initializer 'a' has external data"));
}

TEST(OnnxBadFiles, ExternalDataByteLimit) {
  OnnxReadOptions small;
  small.limits.max_external_bytes = 60;
  Status s = ReadError("external.onnx", small);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), Mentions("initializer 'b'"));
}

TEST(OnnxBadFiles, MissingFile) {
  Expected<OnnxModel> m = ReadOnnxModel(OnnxTestModel("no_such_model.onnx"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIoError);
}

}  // namespace onnx_bad_files_tests
}  // namespace kiln
