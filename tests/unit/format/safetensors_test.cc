// safetensors: every dtype, __metadata__, single and sharded models, the real
// tiny models, and a corpus of broken files each refused with a precise message.
#include "format/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "testing/test_paths.h"
#include "unit/format/byte_image.h"

namespace kiln {
namespace safetensors_tests {

using testing::ByteImage;

// An image: the u64 header length, the header text, then `data`.
ByteImage Image(const std::string& header, const std::vector<uint8_t>& data = {}) {
  ByteImage b;
  b.U64(header.size()).Raw(header).Raw(data);
  return b;
}

Expected<std::unique_ptr<SafetensorsFile>> ParseImage(const ByteImage& b) {
  return SafetensorsFile::Parse(b.data(), b.size(), "bad.safetensors");
}

void ExpectError(const ByteImage& image, StatusCode code, const std::vector<std::string>& fragments) {
  auto f = ParseImage(image);
  ASSERT_FALSE(f.ok()) << "parsed although broken";
  const Status& s = f.status();
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_EQ(s.message().rfind("bad.safetensors: ", 0), 0u) << s.message();
  for (const auto& fragment : fragments) {
    EXPECT_NE(s.message().find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << s.message();
  }
}

TEST(Safetensors, ReadsEveryDtype) {
  struct Case {
    const char* name;
    DType dtype;
    int bytes;
  };
  const Case cases[] = {
      {"F64", DType::kF64, 8},   {"F32", DType::kF32, 4},        {"F16", DType::kF16, 2},
      {"BF16", DType::kBF16, 2}, {"F8_E4M3", DType::kF8E4M3, 1}, {"F8_E5M2", DType::kF8E5M2, 1},
      {"I64", DType::kI64, 8},   {"I32", DType::kI32, 4},        {"I16", DType::kI16, 2},
      {"I8", DType::kI8, 1},     {"U8", DType::kU8, 1},          {"BOOL", DType::kBool, 1}};
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"ünïcode\"}";
  uint64_t offset = 0;
  for (const auto& c : cases) {
    uint64_t n = 2 * 3 * c.bytes;
    header += fmt::format(",\"t.{}\":{{\"dtype\":\"{}\",\"shape\":[2,3],\"data_offsets\":[{},{}]}}", c.name,
                          c.name, offset, offset + n);
    offset += n;
  }
  header += "}";
  std::vector<uint8_t> data(offset);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  ByteImage image = Image(header, data);
  auto f = ParseImage(image);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->metadata().at("note"), "ünïcode");
  EXPECT_EQ((*f)->data_offset(), 8 + header.size());
  ASSERT_EQ((*f)->tensors().size(), std::size(cases));
  for (const auto& c : cases) {
    const SafetensorsTensor* t = (*f)->Find(std::string("t.") + c.name);
    ASSERT_NE(t, nullptr) << c.name;
    EXPECT_EQ(t->dtype, c.dtype) << c.name;
    EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(t->num_elements(), 6);
    EXPECT_EQ(t->nbytes(), 6u * c.bytes);
    EXPECT_EQ(t->data, image.data() + (*f)->data_offset() + t->begin);
    EXPECT_EQ(DTypeFromSafetensorsName(c.name), c.dtype);
    EXPECT_EQ(SafetensorsDTypeName(c.dtype), c.name);
  }
  // Sorted by name.
  for (size_t i = 1; i < (*f)->tensors().size(); ++i) {
    EXPECT_LT((*f)->tensors()[i - 1].name, (*f)->tensors()[i].name);
  }
}

TEST(Safetensors, ScalarsEmptyTensorsAndPadding) {
  // Shape [] is a scalar (1 element); shape [0] holds nothing; the header may
  // be padded with spaces (as writers do to align the data).
  std::string header =
      "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
      "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]}}     ";
  float v = 2.5f;
  std::vector<uint8_t> data(4);
  std::memcpy(data.data(), &v, 4);
  auto f = ParseImage(Image(header, data));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->Find("s")->num_elements(), 1);
  EXPECT_EQ((*f)->Find("e")->num_elements(), 0);
  EXPECT_EQ((*f)->Find("e")->nbytes(), 0u);
  EXPECT_TRUE((*f)->metadata().empty());
}

TEST(Safetensors, ReadsTheTinyModels) {
  struct Case {
    const char* model;
    size_t tensors;
    DType dtype;
  };
  for (const Case& c : {Case{"tiny-llama", 39, DType::kBF16}, Case{"tiny-qwen2", 50, DType::kF32},
                        Case{"tiny-qwen3", 46, DType::kBF16}}) {
    auto f = SafetensorsFile::Open(testing::ModelDir(c.model) + "/model.safetensors");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->tensors().size(), c.tensors) << c.model;
    EXPECT_EQ((*f)->metadata().at("format"), "pt");
    int64_t elements = 0;
    for (const auto& t : (*f)->tensors()) {
      EXPECT_EQ(t.dtype, c.dtype) << t.name;
      elements += t.num_elements();
    }
    EXPECT_GT(elements, 1000000) << c.model;
  }
  auto qwen3 = SafetensorsFile::Open(testing::ModelDir("tiny-qwen3") + "/model.safetensors");
  ASSERT_TRUE(qwen3.ok());
  const SafetensorsTensor* q_norm = (*qwen3)->Find("model.layers.0.self_attn.q_norm.weight");
  ASSERT_NE(q_norm, nullptr);
  EXPECT_EQ(q_norm->shape, (std::vector<int64_t>{64}));
  const SafetensorsTensor* down = (*qwen3)->Find("model.layers.3.mlp.down_proj.weight");
  EXPECT_EQ(down->shape, (std::vector<int64_t>{256, 768}));
}

// Writes a shard holding the named 2-element F32 tensors, each filled with `value`.
void WriteShard(const std::string& path, const std::vector<std::string>& names, float value) {
  std::string header = "{";
  std::vector<uint8_t> data;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) header += ",";
    header += fmt::format("\"{}\":{{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[{},{}]}}", names[i],
                          8 * i, 8 * i + 8);
    for (int k = 0; k < 2; ++k) {
      uint8_t b[4];
      std::memcpy(b, &value, 4);
      data.insert(data.end(), b, b + 4);
    }
  }
  header += "}";
  testing::WriteFile(path, Image(header, data).bytes());
}

TEST(Safetensors, ShardedModels) {
  std::string dir = testing::MakeTempDir();
  WriteShard(dir + "/model-00001-of-00002.safetensors", {"a", "b"}, 1.0f);
  WriteShard(dir + "/model-00002-of-00002.safetensors", {"c"}, 2.0f);
  testing::WriteFile(dir + "/model.safetensors.index.json",
                     std::string(R"({"metadata": {"total_size": 24}, "weight_map": {
                       "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                       "c": "model-00002-of-00002.safetensors"}})"));
  for (const std::string& path : {dir, dir + "/model.safetensors.index.json"}) {
    auto m = SafetensorsModel::Open(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->files().size(), 2u);
    ASSERT_EQ((*m)->tensors().size(), 3u);
    auto c = (*m)->Find("c");
    ASSERT_TRUE(c.has_value());
    EXPECT_NE(c->file->path().find("model-00002-of-00002"), std::string::npos);
    float v;
    std::memcpy(&v, c->tensor->data, 4);
    EXPECT_EQ(v, 2.0f);
    EXPECT_FALSE((*m)->Find("d").has_value());
  }
}

TEST(Safetensors, ShardedModelErrors) {
  std::string dir = testing::MakeTempDir();
  WriteShard(dir + "/s1.safetensors", {"a", "b"}, 1.0f);
  WriteShard(dir + "/s2.safetensors", {"b"}, 2.0f);
  auto open_with = [&](const std::string& index) {
    testing::WriteFile(dir + "/model.safetensors.index.json", index);
    return SafetensorsModel::Open(dir);
  };
  auto missing = open_with(R"({"weight_map": {"a": "s1.safetensors", "z": "s1.safetensors"}})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tensor 'z' is not in its shard"), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("s1.safetensors"), std::string::npos);

  auto twice = open_with(R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("tensor 'b' appears in both"), std::string::npos)
      << twice.status().message();

  auto escape = open_with(R"({"weight_map": {"a": "../s1.safetensors"}})");
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.status().message().find("not a plain file name"), std::string::npos);

  auto absent = open_with(R"({"weight_map": {"a": "s9.safetensors"}})");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("s9.safetensors"), std::string::npos);

  auto no_map = open_with(R"({"metadata": {}})");
  ASSERT_FALSE(no_map.ok());
  EXPECT_NE(no_map.status().message().find("weight_map"), std::string::npos);

  auto not_json = open_with("{\"weight_map\": ");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("invalid JSON"), std::string::npos);

  auto empty_dir = SafetensorsModel::Open(testing::MakeTempDir());
  ASSERT_FALSE(empty_dir.ok());
  EXPECT_EQ(empty_dir.status().code(), StatusCode::kNotFound);
}

// ---- the corpus of broken files ----

TEST(SafetensorsBadFiles, TruncatedAndHeaderLength) {
  ExpectError(ByteImage().Raw("abc"), StatusCode::kCorrupt, {"truncated", "3 bytes"});
  ExpectError(ByteImage().U64(1000).Raw("{}"), StatusCode::kCorrupt,
              {"header length 1000 beyond the file end (2 bytes follow"});
  ExpectError(ByteImage().U64(~uint64_t{0}).Raw("{}"), StatusCode::kCorrupt,
              {"header length 18446744073709551615"});
  ExpectError(Image("[1,2]"), StatusCode::kCorrupt, {"header does not start with '{'"});
  ExpectError(Image(""), StatusCode::kCorrupt, {"header does not start with '{'"});
  ExpectError(Image("{\"a\": "), StatusCode::kCorrupt, {"header: invalid JSON"});
}

TEST(SafetensorsBadFiles, OffsetsOutOfRangeOrOverlapping) {
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::vector<uint8_t>(8)),
              StatusCode::kCorrupt,
              {"tensor 'w'", "data offsets [0, 16] beyond the end of the data (8 bytes)"});
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::vector<uint8_t>(8)),
              StatusCode::kCorrupt, {"tensor 'w'", "end before they begin"});
  ExpectError(Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    std::vector<uint8_t>(12)),
              StatusCode::kCorrupt, {"tensors 'a' [0, 8) and 'b' [4, 12) overlap"});
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", std::vector<uint8_t>(8)),
              StatusCode::kCorrupt, {"tensor 'w'", "not non-negative integers"});
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", std::vector<uint8_t>(8)),
              StatusCode::kCorrupt, {"tensor 'w'", "data_offsets"});
}

TEST(SafetensorsBadFiles, SizeMismatchAndOverflow) {
  ExpectError(
      Image(R"({"model.layers.3.mlp.up_proj.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]}})",
            std::vector<uint8_t>(10)),
      StatusCode::kCorrupt,
      {"tensor 'model.layers.3.mlp.up_proj.weight'", "dtype BF16 x shape [2, 3] is 12 bytes",
       "data_offsets [0, 10] hold 10"});
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
              StatusCode::kCorrupt, {"tensor 'w'", "overflows the element count"});
  ExpectError(Image(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})"),
              StatusCode::kCorrupt, {"tensor 'w'", "byte size", "overflows"});
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})"), StatusCode::kCorrupt,
              {"tensor 'w'", "non-negative integer"});
  ExpectError(Image(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})"), StatusCode::kCorrupt,
              {"tensor 'w'", "non-negative integer"});
}

TEST(SafetensorsBadFiles, UnknownDtypesAndMissingFields) {
  ExpectError(Image(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", std::vector<uint8_t>(1)),
              StatusCode::kCorrupt, {"tensor 'w'", "unknown dtype 'Q4'"});
  ExpectError(Image(R"({"w":{"dtype":"U32","shape":[1],"data_offsets":[0,4]}})", std::vector<uint8_t>(4)),
              StatusCode::kUnsupported, {"tensor 'w'", "dtype U32 is not supported"});
  ExpectError(Image(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", std::vector<uint8_t>(4)),
              StatusCode::kCorrupt, {"tensor 'w'", "missing string field 'dtype'"});
  ExpectError(Image(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", std::vector<uint8_t>(4)),
              StatusCode::kCorrupt, {"tensor 'w'", "missing array field 'shape'"});
  ExpectError(Image(R"({"w":[1,2]})"), StatusCode::kCorrupt, {"tensor 'w'", "expected an object"});
  ExpectError(Image(R"({"__metadata__":{"format":5}})"), StatusCode::kCorrupt,
              {"__metadata__ 'format'", "string"});
}

TEST(SafetensorsBadFiles, DuplicateNamesAndFields) {
  ExpectError(Image(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                    std::vector<uint8_t>(2)),
              StatusCode::kCorrupt, {"header", "entry 'w' appears twice"});
  ExpectError(Image(R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})",
                    std::vector<uint8_t>(1)),
              StatusCode::kCorrupt, {"entry 'w': field 'dtype' appears twice"});
}

TEST(SafetensorsBadFiles, InvalidUtf8AndDeepNesting) {
  ExpectError(
      Image("{\"w\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", std::vector<uint8_t>(1)),
      StatusCode::kCorrupt, {"header: invalid JSON", "UTF-8"});
  std::string deep = "{\"w\":{\"shape\":" + std::string(5000, '[') + std::string(5000, ']') + "}}";
  ExpectError(Image(deep), StatusCode::kCorrupt, {"entry 'w': nested deeper than the format allows"});
}

TEST(SafetensorsBadFiles, EveryTruncationIsRefused) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})";
  ByteImage whole = Image(header, std::vector<uint8_t>(8, 1));
  for (size_t n = 0; n < whole.size(); ++n) {
    auto f = SafetensorsFile::Parse(whole.data(), n, "cut.safetensors");
    EXPECT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
  }
  EXPECT_TRUE(SafetensorsFile::Parse(whole.data(), whole.size(), "whole.safetensors").ok());
}

TEST(Safetensors, FuzzSeedsAreValidFiles) {
  std::string dir = testing::SourceDir() + "/tests/fuzz/seeds/safetensors_fuzz";
  for (const char* name : {"every_dtype.safetensors", "scalar_and_empty.safetensors", "model.safetensors"}) {
    auto f = SafetensorsFile::Open(dir + "/" + name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
  }
}

}  // namespace safetensors_tests
}  // namespace kiln
