// A corpus of broken GGUF files, written byte by byte: each must be refused
// with a message naming the file, the field and the problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "testing/test_paths.h"
#include "unit/format/byte_image.h"

namespace kiln {
namespace gguf_bad_files_tests {

using testing::ByteImage;

constexpr uint32_t kString = 8, kArray = 9, kU32 = 4, kU8 = 0, kBool = 7;

// The fixed header: magic, version 3, counts.
ByteImage Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  ByteImage b;
  b.Raw("GGUF").U32(version).U64(n_tensors).U64(n_kv);
  return b;
}

// A tensor info: name, dims (ggml order), type, offset.
void TensorInfo(ByteImage& b, const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                uint64_t offset) {
  b.Str(name).U32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) b.U64(d);
  b.U32(type).U64(offset);
}

// Parses `image` as "bad.gguf" and checks the error contains every fragment.
void ExpectError(const ByteImage& image, StatusCode code, const std::vector<std::string>& fragments) {
  auto f = GgufFile::Parse(image.data(), image.size(), "bad.gguf");
  ASSERT_FALSE(f.ok()) << "parsed although broken";
  const Status& s = f.status();
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_EQ(s.message().rfind("bad.gguf: ", 0), 0u) << s.message();
  for (const auto& fragment : fragments) {
    EXPECT_NE(s.message().find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << s.message();
  }
}

TEST(GgufBadFiles, Truncated) {
  ExpectError(ByteImage(), StatusCode::kCorrupt, {"truncated", "0 bytes"});
  ExpectError(ByteImage().Raw("GGUF").U32(3), StatusCode::kCorrupt, {"truncated", "8 bytes"});
  // Ends inside a tensor info, after its dimension count (the metadata makes
  // the file long enough to pass the count check).
  ByteImage b = Header(1, 1);
  b.Str("general.name").U32(kString).Str(std::string(40, 'x'));
  b.Str("b").U32(1);
  ExpectError(b, StatusCode::kCorrupt, {"tensor 'b'", "needs 8 bytes, file ends after 0"});
}

TEST(GgufBadFiles, WrongMagicOrVersion) {
  ExpectError(ByteImage().Raw("GGUX").U32(3).U64(0).U64(0), StatusCode::kCorrupt, {"wrong magic 'GGUX'"});
  ExpectError(ByteImage().Raw("PK\x03\x04").U32(3).U64(0).U64(0), StatusCode::kCorrupt,
              {"wrong magic 'PK\\x03\\x04'", "not a GGUF file"});
  ExpectError(Header(0, 0, 1), StatusCode::kUnsupported, {"version 1", "not supported"});
  ExpectError(Header(0, 0, 4), StatusCode::kUnsupported, {"version 4", "versions 2 and 3"});
  ExpectError(Header(0, 0, 0x03000000), StatusCode::kUnsupported, {"big-endian"});
}

TEST(GgufBadFiles, HugeCountsAreRefusedBeforeAllocating) {
  ExpectError(Header(uint64_t{1} << 60, 0), StatusCode::kCorrupt,
              {"tensor count 1152921504606846976", "cannot fit"});
  ExpectError(Header(0, ~uint64_t{0}), StatusCode::kCorrupt, {"metadata count", "cannot fit"});
  ByteImage arr = Header(0, 1);
  arr.Str("tokens").U32(kArray).U32(kString).U64(uint64_t{1} << 50);
  ExpectError(arr, StatusCode::kCorrupt, {"metadata 'tokens'", "array of 1125899906842624 string values"});
  ByteImage str = Header(0, 1);
  str.Str("general.name").U32(kString).U64(uint64_t{1} << 40).Raw("abc");
  ExpectError(str, StatusCode::kCorrupt,
              {"metadata 'general.name'", "string length 1099511627776 beyond file end"});
  ByteImage key = Header(0, 1);
  key.U64(1000).Raw("short");
  ExpectError(key, StatusCode::kCorrupt, {"metadata entry 0 key", "string length 1000"});
}

TEST(GgufBadFiles, BadMetadataValues) {
  ByteImage type = Header(0, 1);
  type.Str("k").U32(13).U32(0);
  ExpectError(type, StatusCode::kCorrupt, {"metadata 'k'", "unknown value type 13"});

  ByteImage element = Header(0, 1);
  element.Str("k").U32(kArray).U32(99).U64(0);
  ExpectError(element, StatusCode::kCorrupt, {"metadata 'k'", "unknown array element type 99"});

  ByteImage boolean = Header(0, 1);
  boolean.Str("flag").U32(kBool).U8(2);
  ExpectError(boolean, StatusCode::kCorrupt, {"metadata 'flag'", "bool value 2"});

  ByteImage deep = Header(0, 1);
  deep.Str("deep").U32(kArray);
  for (int i = 0; i < 10; ++i) deep.U32(kArray).U64(1);  // element type, count: an array of arrays of ...
  deep.Zeros(64);
  ExpectError(deep, StatusCode::kCorrupt, {"metadata 'deep'", "nested deeper than 8"});

  ByteImage dup = Header(0, 2);
  dup.Str("a").U32(kU8).U8(1).Str("a").U32(kU8).U8(2);
  ExpectError(dup, StatusCode::kCorrupt, {"metadata 'a'", "duplicate key"});

  ByteImage empty_key = Header(0, 1);
  empty_key.Str("").U32(kU8).U8(1);
  ExpectError(empty_key, StatusCode::kCorrupt, {"metadata entry 0", "empty key"});
}

TEST(GgufBadFiles, InvalidUtf8) {
  ByteImage key = Header(0, 1);
  key.Str("gen\xc3(al").U32(kU8).U8(1);
  ExpectError(key, StatusCode::kCorrupt, {"metadata entry 0 key", "invalid UTF-8 at byte 3"});
  ByteImage value = Header(0, 1);
  value.Str("general.name").U32(kString).Str("ok\xed\xa0\x80");  // a surrogate
  ExpectError(value, StatusCode::kCorrupt, {"metadata 'general.name'", "invalid UTF-8 at byte 2"});
  ByteImage name = Header(1, 0);
  TensorInfo(name, "w\xff", {4}, 0, 0);
  ExpectError(name, StatusCode::kCorrupt, {"tensor info 0 name", "invalid UTF-8"});
}

TEST(GgufBadFiles, BadAlignment) {
  ByteImage three = Header(0, 1);
  three.Str("general.alignment").U32(kU32).U32(3);
  ExpectError(three, StatusCode::kCorrupt, {"general.alignment", "3 is not a power of two"});
  ByteImage text = Header(0, 1);
  text.Str("general.alignment").U32(kString).Str("32");
  ExpectError(text, StatusCode::kCorrupt, {"general.alignment", "expected an unsigned integer"});
}

// A file with one well-formed tensor info `name`, then data of `data_bytes`.
ByteImage OneTensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                    size_t data_bytes) {
  ByteImage b = Header(1, 0);
  TensorInfo(b, name, std::move(dims), type, offset);
  b.Align(32).Zeros(data_bytes);
  return b;
}

TEST(GgufBadFiles, BadTensorInfos) {
  ExpectError(OneTensor("w", {2, 2, 2, 2, 2}, 0, 0, 128), StatusCode::kCorrupt,
              {"tensor 'w'", "5 dimensions"});
  ExpectError(OneTensor("w", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0, 0), StatusCode::kCorrupt,
              {"tensor 'w'", "dimension 1", "overflow"});
  ExpectError(OneTensor("w", {~uint64_t{0}}, 0, 0, 0), StatusCode::kCorrupt, {"tensor 'w'", "overflow"});
  ExpectError(OneTensor("w", {uint64_t{1} << 62}, 0, 0, 0), StatusCode::kCorrupt,
              {"tensor 'w'", "byte size", "overflows"});
  ExpectError(OneTensor("w", {4}, 99, 0, 16), StatusCode::kCorrupt, {"tensor 'w'", "unknown ggml type 99"});
  ExpectError(OneTensor("w", {256}, 19, 0, 256), StatusCode::kUnsupported, {"tensor 'w'", "IQ1_S (19)"});
  ExpectError(OneTensor("w", {33, 2}, 2, 0, 64), StatusCode::kCorrupt,
              {"tensor 'w'", "row of 33 elements", "Q4_0's block size 32"});
  ExpectError(OneTensor("w", {4}, 0, 4, 64), StatusCode::kCorrupt,
              {"tensor 'w'", "data offset 4 is not a multiple of the alignment 32"});
  ExpectError(OneTensor("", {4}, 0, 0, 16), StatusCode::kCorrupt, {"tensor info 0", "empty name"});
}

TEST(GgufBadFiles, DataOutOfRange) {
  // dtype x shape = 4 * 100 = 400 bytes, but only 64 follow the header.
  ExpectError(
      OneTensor("blk.0.attn_q.weight", {100}, 0, 0, 64), StatusCode::kCorrupt,
      {"tensor 'blk.0.attn_q.weight'", "data [0, 400) beyond the end of the data section (64 bytes)"});
  // An offset near 2^64 must not wrap around.
  ExpectError(OneTensor("w", {8}, 0, ~uint64_t{0} - 31, 64), StatusCode::kCorrupt,
              {"tensor 'w'", "beyond the end"});
}

TEST(GgufBadFiles, OverlappingAndDuplicateTensors) {
  ByteImage overlap = Header(2, 0);
  TensorInfo(overlap, "a", {16}, 0, 0);   // [0, 64)
  TensorInfo(overlap, "b", {16}, 0, 32);  // [32, 96)
  overlap.Align(32).Zeros(128);
  ExpectError(overlap, StatusCode::kCorrupt, {"tensors 'a' [0, 64) and 'b' [32, 96) overlap"});

  ByteImage dup = Header(2, 0);
  TensorInfo(dup, "a", {8}, 0, 0);
  TensorInfo(dup, "a", {8}, 0, 32);
  dup.Align(32).Zeros(64);
  ExpectError(dup, StatusCode::kCorrupt, {"tensor 'a'", "duplicate tensor name"});
}

// Cutting a valid file anywhere yields an error, never a crash, and only the
// whole file parses.
TEST(GgufBadFiles, EveryTruncationIsRefused) {
  GgufWriter w;
  ASSERT_TRUE(w.SetString("general.architecture", "llama").ok());
  ASSERT_TRUE(w.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "<s>"}).ok());
  std::vector<float> data(40, 1.0f);
  ASSERT_TRUE(w.AddTensor("x", DType::kF32, {5, 8}, data.data(), 160).ok());
  std::vector<uint8_t> image = w.Serialize();
  for (size_t n = 0; n < image.size(); ++n) {
    auto f = GgufFile::Parse(image.data(), n, "cut.gguf");
    EXPECT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
    if (!f.ok()) {
      EXPECT_EQ(f.status().message().rfind("cut.gguf: ", 0), 0u);
    }
  }
  EXPECT_TRUE(GgufFile::Parse(image.data(), image.size(), "whole.gguf").ok());
}

TEST(GgufBadFiles, OpenNamesThePathOnDisk) {
  std::string dir = testing::MakeTempDir();
  testing::WriteFile(dir + "/empty.gguf", std::vector<uint8_t>{});
  auto f = GgufFile::Open(dir + "/empty.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("empty.gguf: truncated"), std::string::npos) << f.status().message();
  auto missing = GgufFile::Open(dir + "/absent.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_NE(missing.status().message().find("absent.gguf"), std::string::npos);
}

}  // namespace gguf_bad_files_tests
}  // namespace kiln
