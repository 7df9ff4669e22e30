// The .kiln container: sections round-trip at page boundaries, and a
// damaged file (flipped bytes in the header, the table or a checked
// section; truncated; another format version) is refused with a message
// that says which, while flipped weight bytes are caught by Verify.
#include "format/artifact_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "testing/test_paths.h"

namespace kiln {
namespace artifact_file_tests {

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class ArtifactFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::MakeTempDir() + "/model.kiln";
    weights_.resize(10000);
    for (size_t i = 0; i < weights_.size(); ++i) weights_[i] = static_cast<uint8_t>(i * 7);
    ArtifactWriter w;
    ASSERT_TRUE(w.AddText("metadata", R"({"a": 1})").ok());
    ASSERT_TRUE(w.Add("weights", weights_).ok());
    ASSERT_TRUE(w.AddText("empty", "").ok());
    ASSERT_TRUE(w.AddText("plan", "the plan").ok());
    ASSERT_TRUE(w.Write(path_).ok());
    image_ = ReadAll(path_);
  }

  // Parses image_ with `edit` applied; the error message, or "" when it parsed.
  std::string ParseError(const std::vector<uint8_t>& image) {
    auto f = ArtifactFile::Parse(image.data(), image.size(), "edited.kiln");
    return f.ok() ? "" : f.status().message();
  }

  size_t SectionOffset(const std::string& name) {
    auto f = ArtifactFile::Parse(image_.data(), image_.size(), "x");
    EXPECT_TRUE(f.ok());
    return static_cast<size_t>((*f)->Find(name)->offset);
  }

  std::string path_;
  std::vector<uint8_t> weights_;
  std::vector<uint8_t> image_;
};

TEST_F(ArtifactFileTest, SectionsRoundTripOnPageBoundaries) {
  auto f = ArtifactFile::Open(path_);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->format_version(), kArtifactFormatVersion);
  ASSERT_EQ((*f)->sections().size(), 4u);
  EXPECT_EQ((*f)->sections()[0].name, "metadata");
  EXPECT_EQ((*f)->sections()[0].text(), R"({"a": 1})");
  const ArtifactSection* w = (*f)->Find("weights");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->offset % kArtifactAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % kArtifactAlignment, 0u);
  ASSERT_EQ(w->bytes, weights_.size());
  EXPECT_EQ(std::memcmp(w->data, weights_.data(), weights_.size()), 0);
  EXPECT_EQ((*f)->Find("empty")->bytes, 0u);
  EXPECT_EQ((*f)->Find("plan")->text(), "the plan");
  EXPECT_EQ((*f)->Find("missing"), nullptr);
  EXPECT_FALSE((*f)->Require("missing").ok());
  EXPECT_TRUE((*f)->VerifyAll().ok());
  EXPECT_TRUE(IsArtifactFile(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".partial"));
}

TEST_F(ArtifactFileTest, NotAnArtifact) {
  std::vector<uint8_t> gguf = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0};
  EXPECT_NE(ParseError(gguf).find("not a kiln artifact"), std::string::npos);
  EXPECT_NE(ParseError({}).find("not a kiln artifact"), std::string::npos);
}

TEST_F(ArtifactFileTest, FlippedHeaderByteIsRefused) {
  for (size_t at : {8u, 13u, 20u, 40u, 60u}) {
    std::vector<uint8_t> image = image_;
    image[at] ^= 0x10;
    EXPECT_NE(ParseError(image).find("header fails its checksum"), std::string::npos) << at;
  }
}

TEST_F(ArtifactFileTest, FlippedTableByteIsRefused) {
  std::vector<uint8_t> image = image_;
  image[kArtifactHeaderBytes + 40] ^= 1;  // the first section's size
  EXPECT_NE(ParseError(image).find("section table fails its checksum"), std::string::npos);
}

TEST_F(ArtifactFileTest, FlippedCheckedSectionIsRefusedAtOpen) {
  std::vector<uint8_t> image = image_;
  image[SectionOffset("plan") + 2] ^= 1;
  EXPECT_NE(ParseError(image).find("section 'plan' fails its checksum"), std::string::npos);
}

TEST_F(ArtifactFileTest, FlippedWeightByteIsCaughtByVerify) {
  std::vector<uint8_t> image = image_;
  image[SectionOffset("weights") + 5000] ^= 1;
  auto f = ArtifactFile::Parse(image.data(), image.size(), "edited.kiln");
  ASSERT_TRUE(f.ok()) << "weights are checked on request only";
  Status s = (*f)->VerifyAll();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("section 'weights' fails its checksum"), std::string::npos);
}

TEST_F(ArtifactFileTest, TruncationAnywhereIsRefused) {
  for (size_t size : {size_t{4}, size_t{40}, size_t{100}, image_.size() / 2, image_.size() - 1}) {
    std::vector<uint8_t> image(image_.begin(), image_.begin() + static_cast<std::ptrdiff_t>(size));
    std::string error = ParseError(image);
    EXPECT_FALSE(error.empty()) << size;
    if (size >= kArtifactHeaderBytes) {
      EXPECT_NE(error.find("truncated"), std::string::npos) << error;
    }
  }
}

TEST_F(ArtifactFileTest, AnotherFormatVersionIsRefusedByName) {
  // A file written by a later kiln: a valid header with another version.
  std::vector<uint8_t> image = image_;
  const uint32_t version = kArtifactFormatVersion + 1;
  std::memcpy(image.data() + 8, &version, 4);
  // Re-seal the header so that only the version differs.
  const uint64_t hash = ArtifactChecksum({image.data(), 56});
  std::memcpy(image.data() + 56, &hash, 8);
  std::string error = ParseError(image);
  EXPECT_NE(error.find("format version 2"), std::string::npos) << error;
  EXPECT_NE(error.find("kiln compile"), std::string::npos) << error;
}

TEST_F(ArtifactFileTest, WriterRefusesBadNames) {
  ArtifactWriter w;
  EXPECT_FALSE(w.AddText("", "x").ok());
  EXPECT_FALSE(w.AddText(std::string(kArtifactMaxNameBytes + 1, 'n'), "x").ok());
  EXPECT_TRUE(w.AddText("a", "x").ok());
  EXPECT_FALSE(w.AddText("a", "y").ok());
}

}  // namespace artifact_file_tests
}  // namespace kiln
