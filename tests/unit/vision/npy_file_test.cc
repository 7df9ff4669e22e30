// The .npy reader: a float32 array, and files it must refuse.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "vision/npy_file.h"

namespace kiln {
namespace {

std::string Npy(const std::string& descr, const std::string& shape, size_t floats) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (size_t i = 0; i < floats; ++i) {
    float f = static_cast<float>(i) * 0.5f;
    out.append(reinterpret_cast<const char*>(&f), 4);
  }
  return out;
}

Expected<HostTensor> Parse(const std::string& s) {
  return ParseNpyFloat32(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(NpyFile, ReadsFloat32Arrays) {
  auto t = Parse(Npy("<f4", "1, 6, 3", 18));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->type.dims, (std::vector<int64_t>{1, 6, 3}));
  EXPECT_FLOAT_EQ(t->data<float>()[17], 8.5f);
  auto scalar = Parse(Npy("<f4", "", 1));
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->type.dims.empty());
}

TEST(NpyFile, RefusesOtherDtypesAndWrongSizes) {
  EXPECT_FALSE(Parse(Npy("<f8", "2", 4)).ok());
  EXPECT_FALSE(Parse(Npy("<f4", "2, 3", 5)).ok());
  EXPECT_FALSE(Parse(Npy("<f4", "99999999999999", 0)).ok());
  EXPECT_FALSE(Parse("not numpy at all").ok());
  const std::string good = Npy("<f4", "4", 4);
  EXPECT_FALSE(Parse(good.substr(0, 20)).ok());
}

}  // namespace
}  // namespace kiln
