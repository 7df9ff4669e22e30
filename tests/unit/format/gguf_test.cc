// GGUF reading and writing: metadata of every type round-trips through the
// writer and the reader, tensors land at the alignment, files are replaced
// atomically, and llama.cpp's own files parse with the tensor types goldens.json lists.
#include "format/gguf.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "format/gguf_writer.h"
#include "testing/test_paths.h"
#include "unit/format/byte_image.h"

namespace kiln {
namespace gguf_tests {

using testing::ByteImage;

GgufValue U(GgufType t, uint64_t v) {
  return GgufValue::UInt(t, v);
}
GgufValue I(GgufType t, int64_t v) {
  return GgufValue::Int(t, v);
}
GgufValue S(const std::string& s) {
  return GgufValue::String(s);
}

// One value of every type, including arrays of arrays.
std::vector<std::pair<std::string, GgufValue>> EveryType() {
  std::vector<std::pair<std::string, GgufValue>> kv;
  kv.emplace_back("t.u8", U(GgufType::kU8, 255));
  kv.emplace_back("t.i8", I(GgufType::kI8, -128));
  kv.emplace_back("t.u16", U(GgufType::kU16, 65535));
  kv.emplace_back("t.i16", I(GgufType::kI16, -32768));
  kv.emplace_back("t.u32", U(GgufType::kU32, 4294967295u));
  kv.emplace_back("t.i32", I(GgufType::kI32, std::numeric_limits<int32_t>::min()));
  kv.emplace_back("t.u64", U(GgufType::kU64, std::numeric_limits<uint64_t>::max()));
  kv.emplace_back("t.i64", I(GgufType::kI64, std::numeric_limits<int64_t>::min()));
  kv.emplace_back("t.f32", GgufValue::Float(GgufType::kF32, 0.1));
  kv.emplace_back("t.f64", GgufValue::Float(GgufType::kF64, 0.1));
  kv.emplace_back("t.bool", I(GgufType::kBool, 1));
  kv.emplace_back("t.string", S("héllo ✓ 😀"));
  kv.emplace_back("t.empty_string", S(""));
  kv.emplace_back("t.array_i32",
                  GgufValue::Array(GgufType::kI32, {I(GgufType::kI32, -1), I(GgufType::kI32, 7)}));
  kv.emplace_back("t.array_f32", GgufValue::Array(GgufType::kF32, {GgufValue::Float(GgufType::kF32, 1.5)}));
  kv.emplace_back("t.array_bool",
                  GgufValue::Array(GgufType::kBool, {I(GgufType::kBool, 0), I(GgufType::kBool, 1)}));
  kv.emplace_back("t.array_string", GgufValue::Array(GgufType::kString, {S("a b"), S(""), S("ĠHello")}));
  kv.emplace_back("t.array_empty", GgufValue::Array(GgufType::kU64, {}));
  kv.emplace_back("t.array_nested",
                  GgufValue::Array(GgufType::kArray, {GgufValue::Array(GgufType::kString, {S("x"), S("y")}),
                                                      GgufValue::Array(GgufType::kString, {}),
                                                      GgufValue::Array(GgufType::kString, {S("z")})}));
  kv.emplace_back(
      "t.array_deep",
      GgufValue::Array(
          GgufType::kArray,
          {GgufValue::Array(GgufType::kArray, {GgufValue::Array(GgufType::kU8, {U(GgufType::kU8, 9)})})}));
  return kv;
}

TEST(Gguf, EveryMetadataTypeRoundTrips) {
  GgufWriter writer;
  for (const auto& [k, v] : EveryType()) ASSERT_TRUE(writer.Set(k, v).ok()) << k;
  std::vector<uint8_t> image = writer.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "every.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->version(), 3u);
  auto expected = EveryType();
  ASSERT_EQ((*file)->metadata().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*file)->metadata()[i].first, expected[i].first);  // file order is kept
    EXPECT_TRUE((*file)->metadata()[i].second == expected[i].second)
        << expected[i].first << ": " << (*file)->metadata()[i].second.ToString();
  }
  const GgufFile& f = **file;
  EXPECT_EQ(f.GetInt("t.u8"), 255);
  EXPECT_EQ(f.GetInt("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.GetInt("t.u64"), std::nullopt);  // beyond int64
  EXPECT_EQ(f.Find("t.u64")->AsUInt(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.Find("t.i8")->AsUInt(), std::nullopt);  // negative
  EXPECT_EQ(f.GetFloat("t.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f.GetFloat("t.f64"), 0.1);
  EXPECT_EQ(f.GetFloat("t.u16"), 65535.0);  // integers read as floats
  EXPECT_EQ(f.GetBool("t.bool"), true);
  EXPECT_EQ(f.GetBool("t.u8"), std::nullopt);
  EXPECT_EQ(f.GetString("t.string"), "héllo ✓ 😀");
  EXPECT_EQ(f.GetString("t.u8"), std::nullopt);
  EXPECT_EQ(f.GetInt("absent"), std::nullopt);
  const GgufValue* nested = f.Find("t.array_nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->element_type(), GgufType::kArray);
  ASSERT_EQ(nested->items().size(), 3u);
  EXPECT_EQ(*nested->items()[0].items()[1].AsString(), "y");
  EXPECT_EQ(f.Find("t.array_deep")->items()[0].items()[0].items()[0].AsInt(), 9);
  EXPECT_TRUE(f.tensors().empty());
}

TEST(Gguf, ValuesRenderForHumans) {
  EXPECT_EQ(S("abc").ToString(), "\"abc\"");
  EXPECT_EQ(I(GgufType::kI32, -3).ToString(), "-3");
  EXPECT_EQ(I(GgufType::kBool, 1).ToString(), "true");
  std::vector<GgufValue> many;
  for (int i = 0; i < 10; ++i) many.push_back(U(GgufType::kU32, i));
  EXPECT_EQ(GgufValue::Array(GgufType::kU32, many).ToString(3), "[0, 1, 2, ... (10 u32 items)]");
  EXPECT_EQ(GgufValue::Array(GgufType::kU32, {}).ToString(), "[]");
}

TEST(Gguf, TensorsLandAtTheAlignment) {
  for (uint32_t alignment : {32u, 64u, 4096u}) {
    GgufWriter writer;
    ASSERT_TRUE(writer.SetString("general.architecture", "test").ok());
    if (alignment != 32) {
      ASSERT_TRUE(writer.SetAlignment(alignment).ok());
    }
    std::vector<float> a = {1, 2, 3};  // 12 bytes: the next tensor must be padded
    std::vector<uint16_t> b = {0x3C00, 0xC000, 0, 0x7BFF, 1, 2};
    std::vector<uint8_t> q(2 * 18, 0x11);
    ASSERT_TRUE(writer.AddTensor("a", DType::kF32, {3}, a.data(), 12).ok());
    ASSERT_TRUE(writer.AddTensor("b", DType::kF16, {2, 3}, b.data(), 12).ok());
    ASSERT_TRUE(writer.AddTensor("q", DType::kQ4_0, {2, 32}, q).ok());
    std::vector<uint8_t> image = writer.Serialize();
    auto file = GgufFile::Parse(image.data(), image.size(), "aligned.gguf");
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const GgufFile& f = **file;
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    ASSERT_EQ(f.tensors().size(), 3u);
    for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % alignment, 0u) << t.name;
    const GgufTensorInfo* tb = f.FindTensor("b");
    ASSERT_NE(tb, nullptr);
    EXPECT_EQ(tb->dims, (std::vector<int64_t>{3, 2}));  // ggml order: innermost first
    EXPECT_EQ(tb->shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(tb->dtype, DType::kF16);
    EXPECT_EQ(tb->ggml_type, 1u);
    EXPECT_EQ(tb->nbytes, 12u);
    EXPECT_EQ(tb->num_elements(), 6);
    EXPECT_EQ(std::memcmp(tb->data, b.data(), 12), 0);
    const GgufTensorInfo* tq = f.FindTensor("q");
    EXPECT_EQ(tq->ggml_type, 2u);
    EXPECT_EQ(tq->nbytes, 36u);
    EXPECT_EQ(tq->data[35], 0x11);
    EXPECT_EQ(f.FindTensor("a")->data[4], 0x00);  // float 2.0 = 00 00 00 40
    EXPECT_EQ(f.FindTensor("a")->data[7], 0x40);
    EXPECT_EQ(f.FindTensor("missing"), nullptr);
  }
}

TEST(Gguf, ReadsVersion2) {
  GgufWriter writer(2);
  ASSERT_TRUE(writer.SetU32("x", 5).ok());
  std::vector<float> a(8, 1.0f);
  ASSERT_TRUE(writer.AddTensor("a", DType::kF32, {8}, a.data(), 32).ok());
  std::vector<uint8_t> image = writer.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "v2.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->version(), 2u);
  EXPECT_EQ((*file)->GetInt("x"), 5);
}

TEST(GgufWriter, RejectsWhatCouldNotBeReadBack) {
  GgufWriter w;
  EXPECT_FALSE(w.Set("", S("x")).ok());
  EXPECT_FALSE(w.Set("k", S("\xff")).ok());
  EXPECT_FALSE(w.Set("k", GgufValue::Array(GgufType::kU8, {S("not a u8")})).ok());
  EXPECT_FALSE(w.SetAlignment(48).ok());
  EXPECT_FALSE(w.Set("general.alignment", S("64")).ok());
  std::vector<uint8_t> bytes(10);
  Status wrong_size = w.AddTensor("t", DType::kF32, {3}, bytes.data(), 10);
  EXPECT_EQ(wrong_size.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_size.message().find("12"), std::string::npos) << wrong_size.message();
  EXPECT_FALSE(w.AddTensor("q", DType::kQ8_0, {33}, bytes.data(), 10).ok());  // partial block
  ASSERT_TRUE(w.AddTensor("t", DType::kI8, {10}, bytes.data(), 10).ok());
  EXPECT_FALSE(w.AddTensor("t", DType::kI8, {10}, bytes.data(), 10).ok());    // duplicate
  EXPECT_FALSE(w.AddTensor("u", DType::kU8, {10}, bytes.data(), 10).ok());    // ggml has no u8
  EXPECT_FALSE(w.AddTensor("b", DType::kBool, {10}, bytes.data(), 10).ok());  // no ggml type
}

TEST(GgufWriter, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  ASSERT_TRUE(w.SetU32("a", 1).ok());
  ASSERT_TRUE(w.SetU32("b", 2).ok());
  ASSERT_TRUE(w.SetString("a", "again").ok());
  auto image = w.Serialize();
  auto f = GgufFile::Parse(image.data(), image.size(), "m.gguf");
  ASSERT_TRUE(f.ok());
  ASSERT_EQ((*f)->metadata().size(), 2u);
  EXPECT_EQ((*f)->metadata()[0].first, "a");
  EXPECT_EQ((*f)->GetString("a"), "again");
}

TEST(GgufWriter, WritesFilesAtomically) {
  std::string dir = testing::MakeTempDir();
  std::string path = dir + "/model.gguf";
  testing::WriteFile(path, std::string("old content"));

  GgufWriter w;
  ASSERT_TRUE(w.SetString("general.name", "new").ok());
  std::vector<float> data(64, 0.5f);
  ASSERT_TRUE(w.AddTensor("w", DType::kF32, {8, 8}, data.data(), data.size() * 4).ok());
  ASSERT_TRUE(w.Write(path).ok());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->GetString("general.name"), "new");
  EXPECT_EQ((*f)->file_size(), w.Serialize().size());
  float first;
  std::memcpy(&first, (*f)->FindTensor("w")->data, 4);
  EXPECT_EQ(first, 0.5f);
  // No temporary file is left beside it.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "model.gguf");
  }
  EXPECT_EQ(entries, 1);

  // A folder that does not exist: an error naming the path, nothing written.
  Status s = w.Write(dir + "/missing/model.gguf");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("missing/model.gguf"), std::string::npos) << s.message();
}

TEST(Gguf, TypeIdsAndNames) {
  EXPECT_EQ(DTypeFromGgmlType(0), DType::kF32);
  EXPECT_EQ(DTypeFromGgmlType(12), DType::kQ4_K);
  EXPECT_EQ(DTypeFromGgmlType(30), DType::kBF16);
  EXPECT_EQ(DTypeFromGgmlType(23), DType::kIQ4_XS);
  EXPECT_EQ(DTypeFromGgmlType(20), DType::kIQ4_NL);
  EXPECT_EQ(DTypeFromGgmlType(21), DType::kIQ3_S);
  EXPECT_EQ(DTypeFromGgmlType(16), DType::kIQ2_XXS);
  EXPECT_EQ(DTypeFromGgmlType(19), std::nullopt);  // IQ1_S
  EXPECT_EQ(DTypeFromGgmlType(4), std::nullopt);   // removed Q4_2
  EXPECT_EQ(GgmlTypeFromDType(DType::kQ6_K), 14u);
  EXPECT_EQ(GgmlTypeFromDType(DType::kBool), std::nullopt);
  EXPECT_EQ(GgmlTypeName(14), "Q6_K");
  EXPECT_EQ(GgmlTypeName(23), "IQ4_XS");
  EXPECT_EQ(GgmlTypeName(4), "type 4");
  EXPECT_EQ(GgmlTypeName(1000), "type 1000");
  for (int i = 0; i < kNumDTypes; ++i) {
    auto id = GgmlTypeFromDType(static_cast<DType>(i));
    if (id) {
      EXPECT_EQ(DTypeFromGgmlType(*id), static_cast<DType>(i));
    }
  }
}

// llama.cpp's files: every one parses, and its tensor types are those in goldens.json.
TEST(Gguf, ReadsLlamaCppFiles) {
  std::string dir = testing::ModelDir("gguf");
  auto text = ReadFileToString(dir + "/goldens.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto goldens = nlohmann::json::parse(*text);
  ASSERT_EQ(goldens["files"].size(), 23u);
  for (const auto& [name, golden] : goldens["files"].items()) {
    SCOPED_TRACE(name);
    auto file = GgufFile::Open(dir + "/" + name);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const GgufFile& f = **file;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.file_size(), golden["size_bytes"].get<uint64_t>());
    EXPECT_EQ(f.GetInt("general.file_type"), golden["general_file_type"].get<int64_t>());
    std::map<std::string, int> counts;
    for (const auto& t : f.tensors()) {
      ++counts[GgmlTypeName(t.ggml_type)];
      EXPECT_EQ(GgmlTypeName(t.ggml_type), golden["tensor_types"][t.name].get<std::string>()) << t.name;
    }
    std::map<std::string, int> expected = golden["tensor_type_counts"].get<std::map<std::string, int>>();
    EXPECT_EQ(counts, expected);
    // The file type name is the suffix of the file name ("tiny-qwen3-Q4_K_M.gguf").
    std::string stem = name.substr(0, name.size() - 5);
    EXPECT_EQ(stem.substr(stem.rfind('-') + 1), f.FileTypeName());
    const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->items().size(), 2048u);
  }
}

// The fuzzer's committed seeds (written by tests/fuzz/make_seeds.py, an
// independent writer) are valid files, and the model-shaped ones load.
TEST(Gguf, FuzzSeedsAreValidFiles) {
  std::string dir = testing::SourceDir() + "/tests/fuzz/seeds/gguf_fuzz";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    auto f = GgufFile::Open(entry.path().string());
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    ++files;
  }
  EXPECT_GE(files, 4);
  auto every = GgufFile::Open(dir + "/every_type.gguf");
  ASSERT_TRUE(every.ok());
  EXPECT_EQ((*every)->GetString("t.string"), "héllo");
  EXPECT_EQ((*every)->Find("t.nested")->items()[0].items()[1].AsInt(), 2);
  EXPECT_EQ((*every)->FindTensor("k")->dtype, DType::kQ6_K);
  auto v2 = GgufFile::Open(dir + "/v2_aligned64.gguf");
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ((*v2)->version(), 2u);
  EXPECT_EQ((*v2)->alignment(), 64u);
}

}  // namespace gguf_tests
}  // namespace kiln
