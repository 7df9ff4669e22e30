// The GBNF rules of JSON itself: any value, and the primitives the JSON
// Schema converter builds on.
#pragma once

#include <string>

namespace kiln {

// Rules json-ws, json-char, json-string, json-integer, json-number,
// json-boolean, json-null, json-value, json-object and json-array, with no
// root. Numbers have at most 16 integer digits, 16 fraction digits and 3
// exponent digits, and whitespace between tokens at most one newline and 20
// spaces or tabs, so that a model cannot run on forever inside one token of
// JSON; every text these rules accept is valid JSON.
const std::string& JsonPrimitiveRules();

// A whole grammar for any JSON object (response_format json_object):
// `root ::= json-object` plus JsonPrimitiveRules().
const std::string& JsonObjectGbnf();

}  // namespace kiln
