// The --dump writer: .npy bytes and the index.
#include "engine/tensor_dump.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/backend.h"
#include "core/half.h"
#include "testing/test_paths.h"

namespace kiln {
namespace tensor_dump_tests {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(NpyTest, HeaderIsAlignedAndDescribesTheArray) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  std::string npy = NpyFloat32(data, 2, 3);
  ASSERT_GE(npy.size(), 10u);
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t header_len = static_cast<uint8_t>(npy[8]) | (static_cast<size_t>(static_cast<uint8_t>(npy[9])) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  std::string header = npy.substr(10, header_len);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': (2, 3)"), std::string::npos) << header;
  EXPECT_EQ(header.back(), '\n');
  ASSERT_EQ(npy.size(), 10 + header_len + sizeof(data));
  EXPECT_EQ(std::memcmp(npy.data() + 10 + header_len, data, sizeof(data)), 0);
}

TEST(TensorDumperTest, WritesOneFilePerValueAndAnIndex) {
  std::string dir = testing::MakeTempDir() + "/dump";
  auto dumper = TensorDumper::Create(dir);
  ASSERT_TRUE(dumper.ok()) << dumper.status().ToString();
  // A bf16 value of 2 rows x 3 columns stored 4 apart.
  std::vector<uint16_t> bf16(8);
  for (int i = 0; i < 8; ++i) bf16[static_cast<size_t>(i)] = F32ToBf16(static_cast<float>(i));
  BoundValue v;
  v.data = reinterpret_cast<uint8_t*>(bf16.data());
  v.row_stride = 4;
  v.cols = 3;
  v.dtype = DType::kBF16;
  (*dumper)->BeginPass({5, 6}, {0, 1}, {0, 0});
  (*dumper)->fn()("layers.0/attn out", v, 2);
  BoundValue marker;  // no memory: skipped
  (*dumper)->fn()("marker", marker, 0);
  ASSERT_TRUE((*dumper)->EndPass().ok());

  std::string file = dir + "/pass0000_0000_layers.0_attn_out.npy";
  std::string npy = ReadAll(file);
  ASSERT_FALSE(npy.empty()) << file;
  size_t header_len = static_cast<uint8_t>(npy[8]) | (static_cast<size_t>(static_cast<uint8_t>(npy[9])) << 8);
  ASSERT_EQ(npy.size(), 10 + header_len + 6 * sizeof(float));
  float got[6];
  std::memcpy(got, npy.data() + 10 + header_len, sizeof(got));
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[2], 2.0f);
  EXPECT_EQ(got[3], 4.0f);  // the second row starts at element 4
  EXPECT_EQ(got[5], 6.0f);

  auto index = nlohmann::json::parse(ReadAll(dir + "/index.json"));
  ASSERT_EQ(index["passes"].size(), 1u);
  const auto& pass = index["passes"][0];
  EXPECT_EQ(pass["token_ids"], nlohmann::json({5, 6}));
  ASSERT_EQ(pass["values"].size(), 1u);
  EXPECT_EQ(pass["values"][0]["name"], "layers.0/attn out");
  EXPECT_EQ(pass["values"][0]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(pass["values"][0]["source_dtype"], "bf16");
}

}  // namespace tensor_dump_tests
}  // namespace kiln
