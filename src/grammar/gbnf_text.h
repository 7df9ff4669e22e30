// Writing GBNF source text: quoting literals and naming rules, for the
// generators that emit grammars (JSON Schema, regex patterns).
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// `text` as a GBNF string literal, quotes included ("a\"b" for a"b).
std::string GbnfLiteral(std::string_view text);

// One code point as it may appear inside a GBNF character class.
std::string GbnfClassChar(char32_t cp);

// `name` reduced to the characters a rule name may hold ([a-zA-Z0-9-]).
std::string GbnfRuleName(std::string_view name);

}  // namespace kiln
