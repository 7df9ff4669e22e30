// Huge-page accounting from smaps text, and buffers advised for each page size.
#include "bench/page_buffer.h"

#include <gtest/gtest.h>

#include <cstring>

namespace kiln::bench {
namespace page_buffer_tests {

constexpr const char* kSmaps =
    "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/kiln\n"
    "Size:                328 kB\n"
    "AnonHugePages:         0 kB\n"
    "VmFlags: rd ex mr mw me dw\n"
    "7f0000000000-7f0040000000 rw-p 00000000 00:00 0 \n"
    "Size:            1048576 kB\n"
    "Rss:             1048576 kB\n"
    "AnonHugePages:   1042432 kB\n"
    "THPeligible:    1\n"
    "VmFlags: rd wr mr mw me ac sd hg\n"
    "7f0040000000-7f0040200000 rw-p 00000000 00:00 0 \n"
    "AnonHugePages:      2048 kB\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0      [stack]\n"
    "AnonHugePages:      2048 kB\n";

TEST(ParseAnonHugeBytes, SumsTheMappingsOverlappingTheRange) {
  auto one = ParseAnonHugeBytes(kSmaps, 0x7f0000000000, 0x7f0040000000);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, int64_t{1042432} * 1024);
  auto two = ParseAnonHugeBytes(kSmaps, 0x7f0000000000, 0x7f0040200000);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, int64_t{1042432 + 2048} * 1024);
  auto none = ParseAnonHugeBytes(kSmaps, 0x1000, 0x2000);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
}

TEST(ParseAnonHugeBytes, RejectsMalformedText) {
  EXPECT_FALSE(ParseAnonHugeBytes("zz-7f00 rw-p 0 0 0\n", 0, ~uintptr_t{0}).ok());
  EXPECT_FALSE(ParseAnonHugeBytes("1000-2000 rw-p 0 0 0\nAnonHugePages: lots\n", 0x1000, 0x2000).ok());
  auto empty = ParseAnonHugeBytes("", 0, 1);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, 0);
}

TEST(TransparentHugePageSetting, IsAKnownWord) {
  const std::string s = TransparentHugePageSetting();
  EXPECT_TRUE(s == "always" || s == "madvise" || s == "never" || s == "unavailable") << s;
}

TEST(PageBuffer, SmallPagesGetNoHugePages) {
  auto buffer = PageBuffer::Map(6 << 20, PageMode::kSmall);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  EXPECT_EQ(buffer->bytes(), size_t{6} << 20);  // a multiple of 2 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % (2 << 20), 0u);
  std::memset(buffer->data(), 1, buffer->bytes());
  auto huge = buffer->HugeBytes();
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_EQ(*huge, 0);
}

TEST(PageBuffer, HugePagesAreReportedWithinTheBuffer) {
  auto buffer = PageBuffer::Map(5 << 20, PageMode::kHuge);  // rounded up to 6 MiB
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  EXPECT_EQ(buffer->bytes(), size_t{6} << 20);
  std::memset(buffer->data(), 1, buffer->bytes());
  auto huge = buffer->HugeBytes();
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  // How many the kernel grants depends on its settings and free memory.
  EXPECT_GE(*huge, 0);
  EXPECT_LE(*huge, static_cast<int64_t>(buffer->bytes()));
  EXPECT_EQ(*huge % (2 << 20), 0);
}

TEST(PageBuffer, MovesOwnership) {
  auto buffer = PageBuffer::Map(2 << 20, PageMode::kSmall);
  ASSERT_TRUE(buffer.ok());
  void* data = buffer->data();
  PageBuffer moved = std::move(buffer).value();
  EXPECT_EQ(moved.data(), data);
  PageBuffer other;
  other = std::move(moved);
  EXPECT_EQ(other.data(), data);
  EXPECT_EQ(moved.data(), nullptr);  // NOLINT: checking the moved-from state
  EXPECT_FALSE(PageBuffer::Map(0, PageMode::kSmall).ok());
}

}  // namespace page_buffer_tests
}  // namespace kiln::bench
