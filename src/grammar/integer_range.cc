// Integer ranges split by sign and digit count, then by leading digit.
#include "grammar/integer_range.h"

#include <algorithm>
#include <vector>

namespace kiln {
namespace {

std::string Digits(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

// Numbers of a.size() digits (leading zeros allowed) from a to b.
// REQUIRES: a.size() == b.size(), a <= b.
std::string SameLength(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return "\"" + a + "\"";
  // Every string of this length: without this shortcut the split below
  // would branch twice per digit.
  if (a.find_first_not_of('0') == std::string::npos && b.find_first_not_of('9') == std::string::npos) {
    return a.size() == 1 ? "[0-9]" : "[0-9]{" + std::to_string(a.size()) + "}";
  }
  if (a.size() == 1) return Digits(a[0], b[0]);
  std::string rest_a = a.substr(1), rest_b = b.substr(1);
  if (a[0] == b[0]) return "\"" + std::string(1, a[0]) + "\" " + SameLength(rest_a, rest_b);
  std::string nines(rest_a.size(), '9'), zeros(rest_a.size(), '0');
  std::vector<std::string> parts;
  // a's leading digit with the rest from rest_a up, then whole middle digits,
  // then b's leading digit with the rest up to rest_b.
  parts.push_back("\"" + std::string(1, a[0]) + "\" " + SameLength(rest_a, nines));
  if (a[0] + 1 <= b[0] - 1) {
    parts.push_back(Digits(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1)) +
                    (rest_a.size() == 1 ? " [0-9]" : " [0-9]{" + std::to_string(rest_a.size()) + "}"));
  }
  parts.push_back("\"" + std::string(1, b[0]) + "\" " + SameLength(zeros, rest_b));
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

// Non-negative integers in [lo, hi], without leading zeros.
std::vector<std::string> NonNegative(int64_t lo, int64_t hi) {
  std::vector<std::string> parts;
  int64_t low_of_length = 0, high_of_length = 9;
  for (int digits = 1; digits <= 16 && low_of_length <= hi; ++digits) {
    int64_t a = std::max(lo, low_of_length), b = std::min(hi, high_of_length);
    if (a <= b) parts.push_back(SameLength(std::to_string(a), std::to_string(b)));
    low_of_length = high_of_length + 1;
    high_of_length = high_of_length * 10 + 9;
  }
  return parts;
}

}  // namespace

std::string IntegerRangeGbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> parts;
  if (lo < 0) {
    // -x for x in [max(1, -hi), -lo]
    for (const std::string& p : NonNegative(std::max<int64_t>(1, -hi), -lo)) parts.push_back("\"-\" " + p);
  }
  if (hi >= 0) {
    for (const std::string& p : NonNegative(std::max<int64_t>(0, lo), hi)) parts.push_back(p);
  }
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

}  // namespace kiln
