// A file mapping's pages, dropped, read back as the file's bytes.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace kiln {
namespace mapped_file_tests {

TEST(MappedFile, DroppedPagesReadBackFromTheFile) {
  const std::string path = ::testing::TempDir() + "/mapped_file_drop.bin";
  std::vector<uint8_t> bytes(5 * 4096 + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  const uint8_t* data = (*mapped)->data();
  ASSERT_EQ((*mapped)->size(), bytes.size());
  EXPECT_EQ(std::vector<uint8_t>(data, data + bytes.size()), bytes);
  // A range that starts and ends inside pages: the pages wholly inside go.
  DropMappedPages(data + 100, bytes.size() - 200);
  DropMappedPages(data, 10);  // within one page: nothing to drop
  EXPECT_EQ(std::vector<uint8_t>(data, data + bytes.size()), bytes);
}

}  // namespace mapped_file_tests
}  // namespace kiln
