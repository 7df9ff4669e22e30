// A scratch file's pages, written, dropped and read back as written; a
// temporary folder held in memory is refused.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/mapped_file.h"
#include "core/scratch_file.h"

namespace kiln {
namespace scratch_file_tests {

// Sets TMPDIR for one test and puts back what was there.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const std::string& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (old_) {
      ::setenv("TMPDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

bool HeldInMemory(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

TEST(ScratchFile, DroppedPagesReadBackAsWritten) {
  const std::string dir = ::testing::TempDir();
  if (HeldInMemory(dir)) GTEST_SKIP() << dir << " is held in memory";
  ScopedTmpdir tmpdir(dir);
  const uint64_t bytes = 6 * 4096 + 77;
  auto mapped = MapScratchFile(bytes);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  uint8_t* data = mapped->get();
  for (uint64_t i = 0; i < bytes; ++i) EXPECT_EQ(data[i], 0) << i;  // starts zeroed
  for (uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
  // Anonymous memory would read back as zeros here.
  DropMappedPages(data, bytes);
  for (uint64_t i = 0; i < bytes; ++i) ASSERT_EQ(data[i], static_cast<uint8_t>(i * 13 + 5)) << i;
}

TEST(ScratchFile, RefusesAFolderHeldInMemory) {
  if (!HeldInMemory("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  ScopedTmpdir tmpdir("/dev/shm");
  auto mapped = MapScratchFile(4096);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(mapped.status().message().find("/dev/shm"), std::string::npos) << mapped.status().ToString();
}

TEST(ScratchFile, NamesAMissingFolder) {
  ScopedTmpdir tmpdir("/nonexistent-scratch-folder");
  auto mapped = MapScratchFile(4096);
  ASSERT_FALSE(mapped.ok());
  EXPECT_NE(mapped.status().ToString().find("/nonexistent-scratch-folder"), std::string::npos);
}

}  // namespace scratch_file_tests
}  // namespace kiln
