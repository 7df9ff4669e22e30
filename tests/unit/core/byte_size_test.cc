// The byte-size parser: every spelling --kv-cache-memory and
// --max-body-size accept, and clear refusals.
#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace kiln {
namespace byte_size_tests {

int64_t Bytes(const char* text) {
  Expected<ByteSize> size = ParseByteSize(text);
  EXPECT_TRUE(size.ok()) << text << ": " << size.status().ToString();
  return size.ok() ? size->bytes : -1;
}

TEST(ByteSizeTest, PlainNumbersAreBytes) {
  EXPECT_EQ(Bytes("1048576"), 1048576);
  EXPECT_EQ(Bytes("0"), 0);
  EXPECT_EQ(Bytes("1.5"), 1);
  EXPECT_EQ(Bytes("4096B"), 4096);
}

TEST(ByteSizeTest, UnitsArePowersOf1024InAnyCase) {
  EXPECT_EQ(Bytes("64k"), 64ll << 10);
  EXPECT_EQ(Bytes("64KiB"), 64ll << 10);
  EXPECT_EQ(Bytes("64KB"), 64ll << 10);
  EXPECT_EQ(Bytes("16MiB"), 16ll << 20);
  EXPECT_EQ(Bytes("512mib"), 512ll << 20);
  EXPECT_EQ(Bytes("2G"), 2ll << 30);
  EXPECT_EQ(Bytes("2GB"), 2ll << 30);
  EXPECT_EQ(Bytes("1.5g"), 3ll << 29);
  EXPECT_EQ(Bytes("1T"), 1ll << 40);
  EXPECT_EQ(Bytes("1TiB"), 1ll << 40);
  EXPECT_EQ(Bytes("300 M"), 300ll << 20);
}

TEST(ByteSizeTest, SaysWhetherAUnitWasWritten) {
  EXPECT_FALSE(ParseByteSize("0.2")->has_unit);
  EXPECT_DOUBLE_EQ(ParseByteSize("0.2")->number, 0.2);
  EXPECT_TRUE(ParseByteSize("1B")->has_unit);
  EXPECT_TRUE(ParseByteSize("1 k")->has_unit);
}

TEST(ByteSizeTest, RefusesWhatIsNotASize) {
  for (const char* bad : {"", "abc", "-1G", "1.2.3G", "12X", "G", "nan", "inf", "1KK", "1iB", "1 MiB x",
                          "9000000000T"}) {
    Expected<ByteSize> size = ParseByteSize(bad);
    EXPECT_FALSE(size.ok()) << bad;
    if (!size.ok()) {
      EXPECT_EQ(size.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_FALSE(size.status().message().empty()) << bad;
    }
  }
}

TEST(ByteSizeTest, TheLargestSizesStopBelow2To63) {
  EXPECT_EQ(Bytes("8388607T"), 8388607ll << 40);
  EXPECT_FALSE(ParseByteSize("8388608T").ok());
}

}  // namespace byte_size_tests
}  // namespace kiln
