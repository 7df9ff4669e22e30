// JSON Schema `pattern` (an ECMA-262 regular expression) as a GBNF
// expression over the JSON text of a string's contents.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace kiln {

inline constexpr size_t kMaxPatternBytes = 4096;
inline constexpr int kMaxPatternNestingDepth = 32;

// Translates the subset: literals and escapes (\n \t \r \uHHHH, escaped
// punctuation), classes [...] [^...], `.`, \d \w \s and their negations,
// groups ( ) and (?: ), alternation, quantifiers * + ? {m} {m,} {m,n} (lazy
// forms match the same strings), and ^ / $ at the ends. Without ^ (or $) any
// text may come before (after) the match, as JSON Schema specifies. Anything
// else (backreferences, lookaround, \b, anchors inside) is an error naming
// it. The expression emits JSON-escaped text: `"` becomes \", a newline \n;
// it may refer to the rule json-char (json_grammar.h). Characters a class
// admits that JSON writes only as \u escapes (other control characters) are
// left out, so the expression can be narrower than the pattern, never wider.
Expected<std::string> RegexToGbnf(std::string_view pattern);

}  // namespace kiln
