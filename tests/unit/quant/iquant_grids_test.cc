// The i-quant grids' shape as the format states it: entry counts, the
// magnitudes each grid uses, no repeated entry, and the sign rule that
// stores 8 signs in 7 bits.
#include "quant/iquant_grids.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln {
namespace iquant_grids_tests {

template <typename T, size_t N>
void ExpectGrid(const T (&grid)[N], int bytes, std::set<int> magnitudes) {
  std::set<T> entries(grid, grid + N);
  EXPECT_EQ(entries.size(), N);
  std::set<int> seen;
  for (T e : grid) {
    for (int j = 0; j < bytes; ++j) seen.insert(GridByte(e, j));
  }
  EXPECT_EQ(seen, magnitudes);
}

TEST(IQuantGrids, SizesMagnitudesAndNoRepeats) {
  ExpectGrid(kIQ2XXSGrid, 8, {8, 25, 43});
  ExpectGrid(kIQ2XSGrid, 8, {8, 25, 43});
  ExpectGrid(kIQ2SGrid, 8, {8, 25, 43});
  ExpectGrid(kIQ3XXSGrid, 4, {4, 12, 20, 28, 36, 44, 52, 62});
  ExpectGrid(kIQ3SGrid, 4, {1, 3, 5, 7, 9, 11, 13, 15});
  // First and last entries, as ggml-common.h lists them.
  EXPECT_EQ(kIQ2XXSGrid[255], 0x2b2b2b1908081908u);
  EXPECT_EQ(kIQ2XSGrid[511], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(kIQ2SGrid[9], 0x08080808082b0808u);
  EXPECT_EQ(kIQ3XXSGrid[5], 0x04040c3eu);
  EXPECT_EQ(kIQ3SGrid[3], 0x0101010bu);
}

TEST(IQuantGrids, SevenSignBitsMakeAnEvenCount) {
  // ggml's ksigns_iq2xs begins 0, 129, 130, 3, 132, 5, 6, 135 and ends 255.
  const int expected[8] = {0, 129, 130, 3, 132, 5, 6, 135};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(SignsFrom7Bits(static_cast<uint32_t>(i)), expected[i]) << i;
  EXPECT_EQ(SignsFrom7Bits(127), 255);
  EXPECT_EQ(SignsFrom7Bits(0xFFFFFF80u), 0);  // only the low 7 bits count
}

}  // namespace iquant_grids_tests
}  // namespace kiln
