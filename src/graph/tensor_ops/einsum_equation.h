// An Einsum equation ("bij,bjk->bik", "...ii->...i", implicit "ij,jk")
// parsed against its operands' shapes: every axis of every operand and of
// the output as a label, and each label's size. Shared by shape inference
// and the kernels.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln {

struct EinsumEquation {
  // Labels 0..51 are the letters a-z, A-Z; labels from 52 on are the axes
  // an ellipsis covers, right-aligned across operands (52 is the leftmost).
  static constexpr int kEllipsisBase = 52;
  std::vector<std::vector<int>> inputs;  // per operand, the label of each axis
  std::vector<int> output;               // the output's labels, in order
  std::vector<int64_t> size;             // per label (0..num_labels-1): its size; 0 when unused
  int num_labels = 0;

  std::vector<int64_t> OutputDims() const;
  // Whether `label` is an axis of the output.
  bool InOutput(int label) const;
};

// Parses `equation` for operands of `dims`. Errors (bad syntax, a term per
// operand missing, a letter whose sizes disagree, an output letter no input
// has) name the op and node.
Expected<EinsumEquation> ParseEinsum(std::string_view node, std::string_view equation,
                                     const std::vector<std::vector<int64_t>>& dims);

}  // namespace kiln
