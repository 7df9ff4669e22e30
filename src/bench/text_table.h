// Aligned plain-text tables for the terminal output of every mode.
#pragma once

#include <string>
#include <vector>

namespace kiln::bench {

class TextTable {
 public:
  enum class Align { kLeft, kRight };

  // One header per column; `align` (default: right for all but the first
  // column) says how each column's cells line up.
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> align = {});

  // Adds a row; missing cells are blank, extra cells are dropped.
  void AddRow(std::vector<std::string> cells);

  // The header, a rule of dashes and the rows, columns two spaces apart,
  // each line ending in a newline and without trailing spaces.
  std::string ToString() const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kiln::bench
