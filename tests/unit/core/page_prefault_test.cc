// A prefault fills a file mapping's page tables a step at a time: the
// mapping's resident size (which counts only pages mapped into this
// process) grows from nothing to the ranges asked for, and no further.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/page_prefault.h"

namespace kiln {
namespace page_prefault_tests {

// The Rss of the mapping that starts at `start`, in KiB (from smaps); -1
// when it is not found.
long MappingRssKiB(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  char wanted[32];
  std::snprintf(wanted, sizeof(wanted), "%lx-", reinterpret_cast<unsigned long>(start));
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(wanted, 0) == 0) {
      in_mapping = true;
    } else if (in_mapping && line.rfind("Rss:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long kib = -1;
      fields >> kib;
      return kib;
    }
  }
  return -1;
}

TEST(PagePrefault, PopulatesTheRangesItIsGivenAndNothingElse) {
  const std::string path = ::testing::TempDir() + "/page_prefault.bin";
  constexpr size_t kMiB = 1 << 20;
  std::vector<uint8_t> bytes(32 * kMiB, 0x5a);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  const uint8_t* data = (*mapped)->data();
  const long before = MappingRssKiB(data);
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
  const long after = MappingRssKiB(data);
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

// Nothing to do: no step.
TEST(PagePrefault, NoRangesIsDoneAtOnce) {
  PagePrefault prefault({});
  EXPECT_TRUE(prefault.done());
  EXPECT_FALSE(prefault.Step());
  EXPECT_EQ(prefault.populated_bytes(), 0u);
}

}  // namespace page_prefault_tests
}  // namespace kiln
