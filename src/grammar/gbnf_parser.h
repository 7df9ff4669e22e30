// Reads grammars in llama.cpp's GBNF notation ("root ::= ...") into a
// Grammar, checking them as untrusted input.
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace kiln {

// Parses GBNF: rules `name ::= alternatives`, alternation `|`, grouping
// `( )`, repetition `* + ? {m} {m,} {m,n}`, string literals with escapes
// (\n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), character classes `[a-z]`
// and `[^...]`, `.` for any character and `#` comments. Rules may span lines;
// a rule ends where the next `name ::=` begins. `root` is the start rule.
// Errors say "line L, column C: <what was wrong>". Sizes are limited by the
// constants in grammar.h.
Expected<Grammar> ParseGbnf(std::string_view text);

}  // namespace kiln
