// Terminal tables: alignment, padding and multibyte text.
#include "bench/text_table.h"

#include <gtest/gtest.h>

namespace kiln::bench {
namespace text_table_tests {

TEST(TextTable, AlignsColumns) {
  TextTable t({"name", "value", "note"}, {TextTable::Align::kLeft, TextTable::Align::kRight, TextTable::Align::kLeft});
  t.AddRow({"a", "1", ""});
  t.AddRow({"longer", "12345", "x"});
  EXPECT_EQ(t.ToString(),
            "name    value  note\n"
            "------  -----  ----\n"
            "a           1\n"
            "longer  12345  x\n");
}

TEST(TextTable, DefaultAlignmentAndMissingCells) {
  TextTable t({"k", "v"});
  t.AddRow({"only"});
  t.AddRow({"a", "b", "dropped"});
  EXPECT_EQ(t.ToString(),
            "k     v\n"
            "----  -\n"
            "only\n"
            "a     b\n");
}

TEST(TextTable, CountsCodePointsNotBytes) {
  TextTable t({"t", "x"});
  t.AddRow({"µs", "—"});
  t.AddRow({"ms", "ab"});
  EXPECT_EQ(t.ToString(),
            "t    x\n"
            "--  --\n"
            "µs   —\n"
            "ms  ab\n");
}

}  // namespace text_table_tests
}  // namespace kiln::bench
