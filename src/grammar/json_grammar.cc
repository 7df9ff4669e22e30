// JSON's grammar in GBNF, following RFC 8259 with bounded runs.
#include "grammar/json_grammar.h"

namespace kiln {

const std::string& JsonPrimitiveRules() {
  static const std::string rules = R"gbnf(
json-ws ::= | " " | "\n" [ \t]{0,20}
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int-digits ::= "0" | [1-9] [0-9]{0,15}
json-integer ::= "-"? json-int-digits
json-number ::= "-"? json-int-digits ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-member ::= json-string json-ws ":" json-ws json-value json-ws
json-object ::= "{" json-ws (json-member ("," json-ws json-member)*)? "}"
json-array ::= "[" json-ws (json-value json-ws ("," json-ws json-value json-ws)*)? "]"
)gbnf";
  return rules;
}

const std::string& JsonObjectGbnf() {
  static const std::string gbnf = "root ::= json-object\n" + JsonPrimitiveRules();
  return gbnf;
}

}  // namespace kiln
