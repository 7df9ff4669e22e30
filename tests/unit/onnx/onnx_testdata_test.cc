// The reader over every model of the ONNX test data Debian ships
// (libonnx-testdata: the backend node tests, PyTorch-converted models and
// the simple models): each valid file reads, or is refused as unsupported
// for a feature kiln states it does not read; none is called corrupt, and
// no valid file is missing a producer, a shape or an opset. And what kiln
// reads of each is what onnx's own protobuf parser reads
// (summarize_onnx_models.py): opsets, inputs and outputs, initializer
// bytes, nodes and their attributes, subgraphs included.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "onnx/onnx_read_context.h"
#include "onnx/onnx_reader.h"
#include "testing/test_paths.h"

namespace kiln {
namespace onnx_testdata_tests {

constexpr const char* kTestDataDir = "/usr/share/libonnx-testdata/data";

TEST(OnnxTestData, EveryModelReadsOrIsRefusedAsUnsupported) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(kTestDataDir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  int read = 0;
  std::map<std::string, int> unsupported;  // the first words of the reason
  for (const auto& entry : fs::recursive_directory_iterator(kTestDataDir)) {
    if (entry.path().filename() != "model.onnx") continue;
    Expected<OnnxModel> m = ReadOnnxModel(entry.path().string());
    if (m.ok()) {
      ++read;
      continue;
    }
    if (m.status().code() != StatusCode::kUnsupported) {
      ADD_FAILURE() << m.status().ToString();
      continue;
    }
    ++unsupported[m.status().message().substr(m.status().message().find(": ") + 2)];
  }
  std::string reasons;
  for (const auto& [reason, count] : unsupported) reasons += std::to_string(count) + "x " + reason + "\n";
  // 1,072 models: 866 read; the rest use opsets below 7, or element types
  // (string, uint16/32/64), sequences, optionals or the training domain that
  // kiln does not read.
  EXPECT_GE(read, 866) << "refused as unsupported:\n" << reasons;
}

using nlohmann::json;

uint32_t Crc32(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Compares what kiln read with what onnx's own parser read (the JSON of
// summarize_onnx_models.py); `where` prefixes every failure.
void ExpectTensor(const OnnxTensor& t, const json& want, const std::string& where) {
  EXPECT_EQ(t.name, want["name"].get<std::string>()) << where;
  EXPECT_EQ(t.dtype, DTypeFromOnnx(want["type"].get<int32_t>())) << where;
  EXPECT_EQ(t.dims, want["dims"].get<std::vector<int64_t>>()) << where;
  EXPECT_EQ(Crc32(std::string(t.data.view())), want["crc"].get<uint32_t>()) << where << " tensor '" << t.name << "' bytes";
}

void ExpectValueInfo(const OnnxValueInfo& v, const json& want, const std::string& where) {
  EXPECT_EQ(v.name, want["name"].get<std::string>()) << where;
  if (want["type"].get<int32_t>() != 0) {
    EXPECT_EQ(v.dtype, DTypeFromOnnx(want["type"].get<int32_t>())) << where;
  }
  if (want["dims"].is_null()) {
    EXPECT_FALSE(v.shape) << where << " '" << v.name << "'";
    return;
  }
  ASSERT_TRUE(v.shape) << where << " '" << v.name << "'";
  ASSERT_EQ(v.shape->size(), want["dims"].size()) << where << " '" << v.name << "'";
  for (size_t i = 0; i < v.shape->size(); ++i) {
    const OnnxDim& d = (*v.shape)[i];
    const json& w = want["dims"][i];
    if (w.is_number()) {
      EXPECT_EQ(d.value, w.get<int64_t>()) << where << " '" << v.name << "' dim " << i;
    } else {
      EXPECT_EQ(d.symbol.empty() ? "?" : d.symbol, w.get<std::string>())
          << where << " '" << v.name << "' dim " << i;
    }
  }
}

void ExpectGraph(const OnnxGraph& g, const json& want, const std::string& where);

void ExpectAttribute(const OnnxAttribute& a, const json& want, const std::string& where) {
  std::string at = where + " attribute '" + a.name + "'";
  EXPECT_EQ(a.name, want["name"].get<std::string>()) << at;
  const json& v = want["value"];
  auto hex = [](const std::string& s) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) out += {digits[c >> 4], digits[c & 15]};
    return out;
  };
  switch (want["type"].get<int>()) {
    case 1:
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kFloat) << at;
      EXPECT_EQ(FloatBits(a.f), v.get<uint32_t>()) << at;
      break;
    case 2:
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kInt) << at;
      EXPECT_EQ(a.i, v.get<int64_t>()) << at;
      break;
    case 3:
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kString) << at;
      EXPECT_EQ(hex(a.s), v.get<std::string>()) << at;
      break;
    case 4:
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kTensor) << at;
      ExpectTensor(*a.t, v, at);
      break;
    case 5:
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kGraph) << at;
      ExpectGraph(*a.g, v, at);
      break;
    case 6: {
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kFloats) << at;
      std::vector<uint32_t> bits;
      for (float f : a.floats) bits.push_back(FloatBits(f));
      EXPECT_EQ(bits, v.get<std::vector<uint32_t>>()) << at;
      break;
    }
    case 7:
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kInts) << at;
      EXPECT_EQ(a.ints, v.get<std::vector<int64_t>>()) << at;
      break;
    case 8: {
      ASSERT_EQ(a.kind, OnnxAttribute::Kind::kStrings) << at;
      std::vector<std::string> hexes;
      for (const std::string& s : a.strings) hexes.push_back(hex(s));
      EXPECT_EQ(hexes, v.get<std::vector<std::string>>()) << at;
      break;
    }
    default: ADD_FAILURE() << at << ": read an attribute of type " << want["type"];
  }
}

void ExpectGraph(const OnnxGraph& g, const json& want, const std::string& where) {
  ASSERT_EQ(g.inputs.size(), want["inputs"].size()) << where;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    ExpectValueInfo(g.inputs[i], want["inputs"][i], where + " input");
  ASSERT_EQ(g.outputs.size(), want["outputs"].size()) << where;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    ExpectValueInfo(g.outputs[i], want["outputs"][i], where + " output");
  ASSERT_EQ(g.initializers.size(), want["initializers"].size()) << where;
  for (size_t i = 0; i < g.initializers.size(); ++i)
    ExpectTensor(g.initializers[i], want["initializers"][i], where);
  // kiln orders the nodes topologically: match them by their outputs.
  ASSERT_EQ(g.nodes.size(), want["nodes"].size()) << where;
  std::map<std::vector<std::string>, const OnnxNode*> by_outputs;
  for (const OnnxNode& n : g.nodes) by_outputs[n.outputs] = &n;
  for (const json& w : want["nodes"]) {
    auto it = by_outputs.find(w["outputs"].get<std::vector<std::string>>());
    ASSERT_NE(it, by_outputs.end()) << where << " node of " << w["op"];
    const OnnxNode& n = *it->second;
    std::string at = where + " node '" + n.name + "'";
    EXPECT_EQ(n.op_type, w["op"].get<std::string>()) << at;
    EXPECT_EQ(n.domain, w["domain"].get<std::string>()) << at;
    EXPECT_EQ(n.inputs, w["inputs"].get<std::vector<std::string>>()) << at;
    ASSERT_EQ(n.attributes.size(), w["attributes"].size()) << at;
    for (size_t i = 0; i < n.attributes.size(); ++i) ExpectAttribute(n.attributes[i], w["attributes"][i], at);
  }
}

TEST(OnnxTestData, EverythingReadMatchesOnnxsOwnParser) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(kTestDataDir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string out = testing::MakeTempDir() + "/summary.json";
  std::string cmd = "/usr/bin/python3 '" + testing::SourceDir() +
                    "/tests/unit/onnx/summarize_onnx_models.py' '" + kTestDataDir + "' '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  json summary = json::parse(in);
  int compared = 0;
  for (const auto& [path, want] : summary.items()) {
    Expected<OnnxModel> m = ReadOnnxModel(path);
    if (!m.ok()) continue;  // the test above checks why
    ++compared;
    std::map<std::string, int64_t> opsets = want["opsets"].get<std::map<std::string, int64_t>>();
    EXPECT_EQ(m->opset_imports, opsets) << path;
    ExpectGraph(m->graph, want["graph"], path);
  }
  EXPECT_GE(compared, 866);
}

}  // namespace onnx_testdata_tests
}  // namespace kiln
