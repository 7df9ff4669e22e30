// The decimal integers of a range as a GBNF expression, digit by digit, for
// JSON Schema's integer minimum and maximum.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// The largest magnitude a generated JSON integer has (16 digits, as
// json-int-digits in json_grammar.h).
inline constexpr int64_t kMaxJsonInteger = 9999999999999999;

// A GBNF expression matching exactly the integers in [lo, hi], written as
// JSON writes them (no leading zeros, no "-0"). Its size grows with the
// number of digits, not with hi - lo.
// REQUIRES: -kMaxJsonInteger <= lo <= hi <= kMaxJsonInteger.
std::string IntegerRangeGbnf(int64_t lo, int64_t hi);

}  // namespace kiln
