// .npy round trips, NumPy's own files, and refusals of broken ones.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/npy.h"
#include "testing/test_paths.h"

namespace kiln {
namespace npy_tests {

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  const int64_t values[] = {1, -2, 3, 4, 5, 6};
  for (DType t : {DType::kI64, DType::kF32, DType::kU8, DType::kBool}) {
    for (std::vector<int64_t> dims : {std::vector<int64_t>{}, {1}, {2, 1}, {0, 3}}) {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      const size_t bytes = *DTypeBytes(t, static_cast<uint64_t>(n));
      auto a = ParseNpy(NpyBytes(t, dims, values, bytes));
      ASSERT_TRUE(a.ok()) << a.status().message();
      EXPECT_EQ(a->dtype, t);
      EXPECT_EQ(a->dims, dims);
      EXPECT_EQ(a->data, std::string(reinterpret_cast<const char*>(values), bytes));
    }
  }
}

TEST(Npy, ReadsWhatNumpyWrites) {
  const std::string dir = ::testing::TempDir() + "/npy_numpy";
  std::filesystem::create_directories(dir);
  const std::string cmd = "/usr/bin/python3 -c \"import numpy as np; np.save('" + dir +
                          "/a.npy', np.arange(24, dtype=np.float32).reshape(2,3,4)); np.save('" + dir +
                          "/b.npy', np.array([[True, False, True]]))\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto a = ReadNpy(dir + "/a.npy");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(reinterpret_cast<const float*>(a->data.data())[23], 23.0f);
  auto b = ReadNpy(dir + "/b.npy");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->dtype, DType::kBool);
  EXPECT_EQ(b->data, std::string("\x01\x00\x01", 3));
}

TEST(Npy, RefusesBrokenFilesWithAReason) {
  float x[4] = {1, 2, 3, 4};
  std::string good = NpyBytes(DType::kF32, {4}, x, sizeof x);
  auto expect_error = [](const std::string& bytes, const std::string& what) {
    auto a = ParseNpy(bytes);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find(what), std::string::npos) << a.status().message();
  };
  expect_error("not numpy", "magic");
  expect_error(good.substr(0, good.size() - 1), "data bytes");
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  expect_error(fortran, "Fortran");
  std::string object = good;
  object.replace(object.find("<f4"), 3, "|O8");
  expect_error(object, "dtype");
  std::string neg = good;
  neg.replace(neg.find("(4,)"), 4, "(-4)");
  expect_error(neg, "dimension");
}

}  // namespace npy_tests
}  // namespace kiln
