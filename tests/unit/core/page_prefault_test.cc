// A prefault fills a file mapping's page tables a step at a time: the
// mapping's resident size (which counts only pages mapped into this
// process) grows from nothing to the ranges asked for, and no further.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/mapped_file.h"
#include "core/page_prefault.h"

namespace kiln {
namespace page_prefault_tests {

// The Rss of the mappings within [start, start + bytes), in KiB (from
// smaps; advice on part of a mapping splits it); -1 when none is found.
long MappingRssKiB(const void* start, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(start);
  const uintptr_t end = begin + bytes;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  long total = -1;
  while (std::getline(smaps, line)) {
    unsigned long from = 0, to = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> from >> dash >> to && dash == '-') {
      inside = from >= begin && to <= end;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long kib = -1;
      fields >> kib;
      total = std::max(total, 0L) + kib;
    }
  }
  return total;
}

TEST(PagePrefault, PopulatesTheRangesItIsGivenAndNothingElse) {
  const std::string path = ::testing::TempDir() + "/page_prefault.bin";
  constexpr size_t kMiB = 1 << 20;
  std::vector<uint8_t> bytes(32 * kMiB, 0x5a);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  std::remove(path.c_str());  // the mapping keeps the file's pages
  const uint8_t* data = (*mapped)->data();
  const long before = MappingRssKiB(data, bytes.size());
  ASSERT_GE(before, 0) << "no smaps entry for the mapping";
  EXPECT_LT(before, 1024);

  // Two ranges, 4 MiB and 5 MiB + 100 bytes, 10 MiB apart: a step each
  // MiB, 4 + 6 of them.
  PagePrefault prefault({{data + 2 * kMiB, 4 * kMiB}, {data + 16 * kMiB, 5 * kMiB + 100}});
  int steps = 0;
  while (prefault.Step()) ++steps;
  EXPECT_EQ(steps, 10);
  EXPECT_TRUE(prefault.done());
  EXPECT_FALSE(prefault.Step());
  EXPECT_EQ(prefault.populated_bytes(), 9 * kMiB + 100);
  const long after = MappingRssKiB(data, bytes.size());
  EXPECT_GE(after, 9 * 1024);
  // Large page-cache folios and fault-around map neighbouring pages too
  // (up to 2 MiB boundaries here), never the 23 MiB left.
  EXPECT_LT(after, 16 * 1024);
}

// A step does one chunk; the owner given keeps the mapping while steps are
// left, so the caller may drop its own reference.
TEST(PagePrefault, StepsAChunkAtATimeAndKeepsItsOwner) {
  const std::string path = ::testing::TempDir() + "/page_prefault_steps.bin";
  std::vector<uint8_t> bytes(8 << 20, 1);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  std::remove(path.c_str());  // the mapping keeps the file's pages
  std::shared_ptr<const MappedFile> owner = std::move(mapped).value();
  PagePrefault prefault({{owner->data(), owner->size()}}, owner);
  owner.reset();
  ASSERT_TRUE(prefault.Step());
  EXPECT_EQ(prefault.populated_bytes(), PagePrefault::kChunkBytes);
  EXPECT_FALSE(prefault.done());
  while (prefault.Step()) {
  }
  EXPECT_EQ(prefault.populated_bytes(), uint64_t{8} << 20);
}

// The pages of `bytes` bytes at `data` that are in the page cache.
size_t ResidentPages(const uint8_t* data, size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  if (::mincore(const_cast<uint8_t*>(data), bytes, resident.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return n;
}

// Pages dropped from the page cache are asked for at once, without a
// fault; those still cached are not looked up page by page.
TEST(PagePrefault, ReadsInWhatThePageCacheLacks) {
  const std::string path = ::testing::TempDir() + "/page_prefault_cold.bin";
  constexpr size_t kBytes = 8 << 20;
  {
    std::vector<uint8_t> bytes(kBytes, 7);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<std::streamsize>(bytes.size()));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  // The last 6 MiB leave the cache (clean pages, written back above).
  ::posix_fadvise(fd, 2 << 20, 6 << 20, POSIX_FADV_DONTNEED);
  ::close(fd);
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  std::remove(path.c_str());  // the mapping keeps the file's pages
  const uint8_t* data = (*mapped)->data();
  const size_t pages = kBytes / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (ResidentPages(data, kBytes) == pages) GTEST_SKIP() << "this file system keeps every page in memory";
  // A range 4 KiB in from each end: its aligned 2 MiB pages are advised
  // for huge pages and left to the steps, the rest is asked for at once.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uint8_t* first = data + page;
  const size_t length = kBytes - 2 * page;
  PagePrefault prefault({{first, length}});
  prefault.ReadInMissingPages();
  EXPECT_EQ(prefault.populated_bytes(), 0u);  // asked for, not mapped
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(first);
  const uintptr_t huge_begin = (begin + kHuge - 1) / kHuge * kHuge;
  const uintptr_t huge_end = (begin + length) / kHuge * kHuge;
  const auto* head_end = reinterpret_cast<const uint8_t*>(huge_begin);
  const auto* tail = reinterpret_cast<const uint8_t*>(huge_end);
  const size_t head_pages = static_cast<size_t>(head_end - first) / page;
  const size_t tail_pages = static_cast<size_t>(first + length - tail) / page;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto asked_for_in = [&] {
    return ResidentPages(first, head_pages * page) == head_pages && ResidentPages(tail, tail_pages * page) == tail_pages;
  };
  while (!asked_for_in() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(asked_for_in()) << head_pages << " and " << tail_pages << " pages at the ends";
  // The steps read in the rest.
  while (prefault.Step()) {
  }
  EXPECT_EQ(ResidentPages(first, length), length / page);
}

// Nothing to do: no step.
TEST(PagePrefault, NoRangesIsDoneAtOnce) {
  PagePrefault prefault({});
  EXPECT_TRUE(prefault.done());
  EXPECT_FALSE(prefault.Step());
  EXPECT_EQ(prefault.populated_bytes(), 0u);
}

}  // namespace page_prefault_tests
}  // namespace kiln
