// Parsing Einsum equations (numpy's rules, which ONNX adopts).
#include "graph/tensor_ops/einsum_equation.h"

#include <algorithm>
#include <string>

#include "graph/tensor_type.h"

namespace kiln {
namespace {

int LetterLabel(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// One term: its letters' labels, and where the ellipsis is (-1: none).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

Expected<Term> ParseTerm(std::string_view node, std::string_view equation, std::string_view text) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (t.ellipsis_at >= 0 || text.substr(i, 3) != "...") {
        return InvalidArgument("Einsum {}: equation '{}': a '.' that is not one '...' per term", node,
                               equation);
      }
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
      continue;
    }
    const int label = LetterLabel(c);
    if (label < 0)
      return InvalidArgument("Einsum {}: equation '{}': invalid character '{}'", node, equation, c);
    t.letters.push_back(label);
  }
  return t;
}

}  // namespace

std::vector<int64_t> EinsumEquation::OutputDims() const {
  std::vector<int64_t> dims;
  for (int l : output) dims.push_back(size[static_cast<size_t>(l)]);
  return dims;
}

bool EinsumEquation::InOutput(int label) const {
  return std::find(output.begin(), output.end(), label) != output.end();
}

Expected<EinsumEquation> ParseEinsum(std::string_view node, std::string_view equation,
                                     const std::vector<std::vector<int64_t>>& dims) {
  const size_t arrow = equation.find("->");
  const std::string_view lhs = equation.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t begin = 0;;) {
    const size_t comma = lhs.find(',', begin);
    KILN_ASSIGN_OR_RETURN(Term t, ParseTerm(node, equation, lhs.substr(begin, comma - begin)));
    terms.push_back(std::move(t));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  if (terms.size() != dims.size()) {
    return InvalidArgument("Einsum {}: equation '{}' has {} input terms for {} inputs", node, equation,
                           terms.size(), dims.size());
  }
  // How many axes each ellipsis covers, and the longest.
  int ellipsis_rank = 0;
  std::vector<int> covered(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const int rank = static_cast<int>(dims[i].size());
    const int letters = static_cast<int>(terms[i].letters.size());
    if (terms[i].ellipsis_at < 0 ? rank != letters : rank < letters) {
      return InvalidArgument("Einsum {}: equation '{}': term {} has {} letters for input {} of shape [{}]",
                             node, equation, i, letters, i, DimsToString(dims[i]));
    }
    covered[i] = rank - letters;
    ellipsis_rank = std::max(ellipsis_rank, covered[i]);
  }
  EinsumEquation eq;
  eq.num_labels = EinsumEquation::kEllipsisBase + ellipsis_rank;
  eq.size.assign(static_cast<size_t>(eq.num_labels), 0);
  std::vector<int> count(static_cast<size_t>(eq.num_labels), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> labels;
    const Term& t = terms[i];
    for (int j = 0; j <= static_cast<int>(t.letters.size()); ++j) {
      if (j == t.ellipsis_at) {
        for (int e = 0; e < covered[i]; ++e)
          labels.push_back(EinsumEquation::kEllipsisBase + ellipsis_rank - covered[i] + e);
      }
      if (j < static_cast<int>(t.letters.size())) labels.push_back(t.letters[static_cast<size_t>(j)]);
    }
    for (size_t axis = 0; axis < labels.size(); ++axis) {
      const int l = labels[axis];
      const int64_t d = dims[i][axis];
      int64_t& s = eq.size[static_cast<size_t>(l)];
      ++count[static_cast<size_t>(l)];
      if (l >= EinsumEquation::kEllipsisBase) {
        // Ellipsis axes broadcast as numpy's do.
        if (s != 0 && s != d && s != 1 && d != 1) {
          return InvalidArgument("Einsum {}: equation '{}': the ellipsis axes of the inputs do not broadcast",
                                 node, equation);
        }
        if (s == 0 || s == 1) s = d;
      } else {
        if (count[static_cast<size_t>(l)] > 1 && s != d) {
          return InvalidArgument("Einsum {}: equation '{}': label '{}' has sizes {} and {}", node, equation,
                                 l < 26 ? static_cast<char>('a' + l) : static_cast<char>('A' + l - 26), s, d);
        }
        s = d;
      }
    }
    eq.inputs.push_back(std::move(labels));
  }
  if (arrow == std::string_view::npos) {
    // Implicit output: the ellipsis axes, then the letters used once, in
    // alphabetical order.
    for (int e = 0; e < ellipsis_rank; ++e) eq.output.push_back(EinsumEquation::kEllipsisBase + e);
    std::vector<int> once;
    for (int l = 0; l < EinsumEquation::kEllipsisBase; ++l) {
      if (count[static_cast<size_t>(l)] == 1) once.push_back(l);
    }
    // Labels 0..25 are a-z and 26..51 A-Z; numpy sorts upper case first.
    std::stable_sort(once.begin(), once.end(),
                     [](int a, int b) { return (a >= 26 ? a - 26 : a + 26) < (b >= 26 ? b - 26 : b + 26); });
    eq.output.insert(eq.output.end(), once.begin(), once.end());
  } else {
    KILN_ASSIGN_OR_RETURN(Term out, ParseTerm(node, equation, equation.substr(arrow + 2)));
    // An output without '...' sums the ellipsis axes away, as numpy does.
    for (int j = 0; j <= static_cast<int>(out.letters.size()); ++j) {
      if (j == out.ellipsis_at) {
        for (int e = 0; e < ellipsis_rank; ++e) eq.output.push_back(EinsumEquation::kEllipsisBase + e);
      }
      if (j < static_cast<int>(out.letters.size())) {
        const int l = out.letters[static_cast<size_t>(j)];
        if (count[static_cast<size_t>(l)] == 0) {
          return InvalidArgument("Einsum {}: equation '{}': output label '{}' is in no input", node, equation,
                                 l < 26 ? static_cast<char>('a' + l) : static_cast<char>('A' + l - 26));
        }
        if (std::count(out.letters.begin(), out.letters.end(), l) > 1) {
          return InvalidArgument("Einsum {}: equation '{}': output label repeated", node, equation);
        }
        eq.output.push_back(l);
      }
    }
  }
  return eq;
}

}  // namespace kiln
