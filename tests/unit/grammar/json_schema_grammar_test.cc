// JSON Schema -> GBNF: a table of schemas with texts that must be accepted
// and rejected, the errors for what is not supported, and random walks over
// Qwen2.5's vocabulary that must produce JSON satisfying the schema.
#include "grammar/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_constraint.h"
#include "grammar/integer_range.h"
#include "grammar/json_grammar.h"
#include "grammar/regex_to_gbnf.h"
#include "grammar_test_util.h"
#include "testing/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace json_schema_grammar_tests {

using testing::Matches;

std::shared_ptr<const Grammar> SchemaGrammar(const std::string& schema) {
  Expected<Grammar> g = CompileJsonSchema(schema);
  EXPECT_TRUE(g.ok()) << schema << "\n" << g.status().ToString();
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

struct SchemaCase {
  std::string schema;
  std::vector<std::string> accepted;
  std::vector<std::string> rejected;
};

const std::vector<SchemaCase>& Cases() {
  static const std::vector<SchemaCase> cases = {
      {R"({"type":"string"})", {R"("")", R"("hi \"there\"\n")", R"("\u00e9")"}, {R"(hi)", R"("a)", "\"\n\""}},
      {R"({"type":"integer"})", {"0", "-12", "1234567890"}, {"01", "1.5", "-", "+1"}},
      {R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "--1"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"type":"null"})", {"null"}, {"nul", "None"}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
      {R"({"enum":["red","green",1,null,{"a":[1]}]})",
       {R"("red")", "1", "null", R"({"a":[1]})"},
       {R"("blue")", "2"}},
      {R"({"const":"fixed"})", {R"("fixed")"}, {R"("other")"}},
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
          "required":["name","age"],"additionalProperties":false})",
       {R"({"name":"Bo","age":3})", R"({ "name" : "Bo" , "age" : 3 })",
        "{\n  \"name\": \"x\",\n  \"age\": -1\n}"},
       {R"({"name":"Bo"})", R"({"age":3,"name":"Bo"})", R"({"name":"Bo","age":3,"x":1})",
        R"({"name":1,"age":3})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":false})",
       {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
       {R"({"b":2,"a":1})", R"({,"b":2})", R"({"a":1,})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})",
       {R"({"a":1})", R"({"a":1,"zz":[true]})", R"({"a":1,"ab":"x","":null})"},
       {R"({"a":1,"a":2})", R"({"zz":1})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {"{}", R"({"x":1,"y":2})"},
       {R"({"x":"1"})"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1, 2,3]"},
       {"[]", "[1,2,3,4]", R"(["a"])"}},
      {R"({"type":"array","items":{"type":"boolean"}})", {"[]", "[true,false,true]"}, {"[1]"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {R"(["a",1])", R"(["a"])", "[]"},
       {R"(["a",1,2])", R"([1,"a"])"}},  // prefixItems do not imply minItems
      {R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},"minItems":0})",
       {"[]", R"(["a"])", R"(["a",1,2])"},
       {"[1]"}},
      {R"({"type":"array","items":[{"type":"integer"}],"additionalItems":false})", {"[1]"}, {"[1,2]"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})",
       {"1", R"("ab")"},
       {R"("abc")", "true"}},
      {R"({"oneOf":[{"const":1},{"const":2}]})", {"1", "2"}, {"3"}},
      // oneOf of a discriminated union: each branch's kind excludes the other.
      {R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},
                    {"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"],
                     "additionalProperties":false}]})",
       {R"({"kind":"a","x":1})", R"({"kind":"b"})"},
       {R"({"kind":"c"})", R"({"kind":"b","x":1})"}},
      {R"({"oneOf":[{"type":"string"},{"type":"integer","minimum":0}]})", {R"("s")", "4"}, {"-4", "true"}},
      // A type beside anyOf narrows each branch.
      {R"({"type":"integer","anyOf":[{"minimum":2},{"maximum":-2}]})", {"2", "-2"}, {"2.5", "0", "-2.5"}},
      {R"({"type":"string","anyOf":[{"const":"a"},{"const":1},false]})", {R"("a")"}, {"1"}},
      {R"({"anyOf":[false,{"type":"null"}]})", {"null"}, {"1"}},
      // const and enum filtered by the type beside them.
      {R"({"type":"string","enum":["a",1,null]})", {R"("a")"}, {"1", "null"}},
      {R"({"type":"integer","enum":[1.0,1.5]})", {"1.0"}, {"1.5"}},
      {R"({"const":"x","enum":["x","y"]})", {R"("x")"}, {R"("y")"}},
      // A property in two allOf members satisfies both.
      {R"({"allOf":[{"properties":{"o":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}},
                     "required":["o"]},
                    {"properties":{"o":{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}}}]})",
       {R"({"o":{"a":1,"b":2}})"},
       {R"({"o":{"a":1}})", R"({"o":{"b":2}})"}},
      // A member's additionalProperties false allows only its own names.
      {R"({"allOf":[{"properties":{"a":{"type":"integer"}},"additionalProperties":false},
                    {"properties":{"b":{"type":"integer"}}}]})",
       {"{}", R"({"a":1})"},
       {R"({"b":1})", R"({"a":1,"b":2})"}},
      // A required name without a property schema takes additionalProperties'.
      {R"({"type":"object","required":["n"],"additionalProperties":{"type":"integer"}})",
       {R"({"n":1})", R"({"n":1,"m":2})"},
       {R"({"n":"x"})", "{}"}},
      // false: the property is never written, nor anything at a tuple place.
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":false}})",
       {"{}", R"({"a":1})", R"({"c":1})"},
       {R"({"b":1})", R"({"a":1,"b":1})"}},
      {R"({"type":"array","items":[{"type":"integer"},false]})", {"[]", "[1]"}, {"[1,2]", "[1,true]"}},
      {R"({"$defs":{"a%b":{"type":"integer"}},"$ref":"#/$defs/a%25b"})", {"3"}, {R"("3")"}},
      // Keywords beside allOf are one more member; true members add nothing.
      {R"({"properties":{"a":{"type":"integer"}},"required":["a"],"allOf":[true,{"required":["b"]}]})",
       {R"({"a":1,"b":null})"},
       {R"({"a":1})", R"({"b":1})", R"({"a":"x","b":1})"}},
      {R"({"allOf":[true,true]})", {"1", R"("x")"}, {}},
      // additionalItems beside an items schema (or none) has no effect.
      {R"({"items":{"type":"integer"},"additionalItems":false})", {"[]", "[1,2,3]"}, {R"(["a"])"}},
      {R"({"additionalItems":false})", {"[]", R"([1,"a"])"}, {"{}"}},
      {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                    {"properties":{"b":{"type":"string"}},"required":["b"]}]})",
       {R"({"a":1,"b":"x"})"},
       {R"({"a":1})", R"({"b":"x"})"}},
      {R"({"$defs":{"pos":{"type":"integer","minimum":1}},"type":"object",
          "properties":{"n":{"$ref":"#/$defs/pos"}},"required":["n"],"additionalProperties":false})",
       {R"({"n":5})"},
       {R"({"n":0})", R"({"n":-5})"}},
      {R"({"definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},
            "next":{"anyOf":[{"$ref":"#/definitions/node"},{"type":"null"}]}},
          "required":["v","next"],"additionalProperties":false}},"$ref":"#/definitions/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"},
       {R"({"v":1})", R"({"v":1,"next":{}})"}},
      {R"({"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},"additionalProperties":false})",
       {"{}", R"({"kids":[{},{"kids":[]}]})"},
       {R"({"kids":[1]})"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("abc")", R"("\n\t")"},
       {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[a-z]+-\\d{2,3}$"})",
       {R"("ab-12")", R"("x-123")"},
       {R"("ab-1")", R"("Ab-12")", R"("ab-12 ")"}},
      {R"({"type":"string","pattern":"ab"})", {R"("ab")", R"("xxabyy")"}, {R"("a b")"}},
      {R"({"type":"string","pattern":"^(a|b\"c)?x*$"})",
       {R"("")", R"("axx")", R"("b\"cx")"},
       {R"("bc")", R"("ab")"}},
      {R"({"type":"string","pattern":"^[^a]\\.$"})", {R"("b.")", "\"\\\".\""}, {R"("a.")", R"("bx")"}},
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-29")", R"("2000-02-29")", R"("0400-02-29")", R"("0001-01-01")", R"("1990-01-31")",
        R"("1990-04-30")", R"("1990-02-28")"},
       {R"("2024-13-01")", R"("24-01-01")", R"("1990-02-31")", R"("1990-04-31")", R"("1900-02-29")",
        R"("2023-02-29")", R"("2024-01-00")", R"("2024-00-10")", R"("0000-01-01")", R"("0000-02-29")"}},
      {R"({"type":"string","format":"time"})",
       {R"("23:59:60Z")", R"("23:59:60.5+00:00")", R"("08:30:00.5+02:00")"},
       {R"("24:00:00Z")", R"("08:30")", R"("22:59:60Z")", R"("23:59:60+01:00")"}},
      {R"({"type":"string","format":"date-time"})",
       {R"("2024-01-01T00:00:00Z")"},
       {R"("2024-01-01 00:00:00Z")"}},
      {R"({"type":"string","format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")"}},
      {R"({"type":"string","format":"email"})",
       {R"("a.b+c@example.co.uk")"},
       {R"("a@b")", R"("@x.com")", R"("a b@x.com")"}},
      {R"({"type":"integer","minimum":0})", {"0", "17"}, {"-1", "-0"}},
      {R"({"type":"integer","exclusiveMinimum":0})", {"1", "90"}, {"0", "-3"}},
      {R"({"type":"integer","maximum":0})", {"0", "-7"}, {"1"}},
      {R"({"type":"integer","minimum":-2,"maximum":12})", {"-2", "0", "12"}, {"-3", "13", "120"}},
      {R"({"type":"integer","minimum":18})", {"18", "99", "100000"}, {"17", "-18", "0"}},
      {R"({"type":"integer","exclusiveMaximum":-5})", {"-6", "-100"}, {"-5", "0"}},
      {R"({"type":"number","minimum":0})", {"0", "0.5", "1200.25"}, {"-0.5"}},
      {R"({"type":"number","minimum":0,"maximum":1})",
       {"0", "0.5", "1", "1.000", "0.999"},
       {"1.5", "1.01", "-0.1", "2"}},
      {R"({"type":"number","minimum":-2,"maximum":3})",
       {"-2", "-1.5", "-0.25", "0", "2.75", "3.0"},
       {"-2.5", "3.5", "-3"}},
      {R"({"type":"number","maximum":-1})", {"-1", "-1.5", "-100"}, {"-0.5", "0", "1"}},
      {R"({"type":"number","exclusiveMaximum":3})", {"2.999", "0", "-7.5"}, {"3", "3.0", "3.5"}},
      {R"({"type":"number","exclusiveMinimum":1,"exclusiveMaximum":2})",
       {"1.5", "1.001", "1.9"},
       {"1", "1.0", "1.000", "2", "2.0", "0.5"}},
      {R"({"type":"number","exclusiveMinimum":-2,"maximum":0})",
       {"-1.5", "-1.999", "0", "-0", "0.0"},
       {"-2", "-2.0", "-2.5", "0.5"}},
      {R"({"type":"number","minimum":-3,"exclusiveMaximum":0})",
       {"-3", "-0.5", "-3.0"},
       {"0", "-0", "0.0", "-0.0", "-3.5"}},
      {R"({"type":"number","exclusiveMinimum":0})", {"0.5", "7", "0.01"}, {"0", "0.0", "-0", "-1"}},
      // Inclusive bounds with fractions.
      {R"({"type":"number","minimum":0.5,"maximum":2.25})",
       {"0.5", "0.50", "1", "2.25", "2.2", "0.75", "2", "2.250"},
       {"0.49", "2.26", "2.3", "0", "3", "-1", "0.4999"}},
      {R"({"type":"number","minimum":-1.5,"maximum":-0.25})",
       {"-1.5", "-0.25", "-1", "-0.3", "-1.499"},
       {"-1.51", "-0.2", "0", "-0", "-2"}},
      {R"({"type":"number","minimum":0.1,"maximum":0.1})", {"0.1", "0.100"}, {"0.11", "0.09", "0"}},
      {R"({"type":"number","minimum":1e-05,"maximum":1})",
       {"0.00001", "0.5", "1", "0.000010"},
       {"0.000009", "0", "1.5", "0.00000999"}},
      {R"({"type":"number","minimum":-0.5,"exclusiveMaximum":1})",
       {"-0.5", "0", "0.999", "-0"},
       {"1", "1.0", "-0.6"}},
      {R"({"type":"number","minimum":3.75})", {"3.75", "4", "100.5"}, {"3.7", "3", "-4"}},
      // Beside an open bound, no more digits than a double tells apart from it.
      {R"({"type":"number","exclusiveMaximum":1000})",
       {"999.99999999999", "-5.5"},
       {"999.999999999999", "999.9999999999999999", "1000"}},
      {R"({"type":"number","minimum":2,"exclusiveMinimum":2,"maximum":9,"exclusiveMaximum":10})",
       {"2.5", "9", "9.0"},
       {"2", "9.5"}},
      {R"({"type":"object"})", {"{}", R"({"a":{"b":[1,"x",null]}})"}, {"[]"}},
      {R"({})", {"1", R"("x")", "[{}]"}, {"x"}},
      {R"(true)", {"null"}, {""}},
      {R"({"$defs":{"json-value":{"type":"integer"},"root":{"type":"boolean"}},"type":"array",
          "prefixItems":[{"$ref":"#/$defs/json-value"},{"$ref":"#/$defs/root"}],"items":false,"minItems":2})",
       {"[1,true]"},
       {"[true,1]", "[1]"}},
      {R"({"title":"t","description":"d","properties":{"a":{"const":1}},"required":["a"],"additionalProperties":false})",
       {R"({"a":1})"},
       {"1"}},
  };
  return cases;
}

TEST(JsonSchemaGrammar, AcceptsAndRejects) {
  for (const SchemaCase& c : Cases()) {
    auto grammar = SchemaGrammar(c.schema);
    if (!grammar) continue;
    for (const std::string& text : c.accepted)
      EXPECT_TRUE(Matches(grammar, text)) << c.schema << "\nshould accept: " << text;
    for (const std::string& text : c.rejected)
      EXPECT_FALSE(Matches(grammar, text)) << c.schema << "\nshould reject: " << text;
  }
}

TEST(JsonSchemaGrammar, GenericJsonObject) {
  auto grammar = testing::ParseOrDie(JsonObjectGbnf());
  ASSERT_NE(grammar, nullptr);
  EXPECT_TRUE(Matches(grammar, R"({"a": [1, 2.5e3, true, null, {"b": "\u00e9\n"}]})"));
  EXPECT_FALSE(Matches(grammar, "[1]"));
  EXPECT_FALSE(Matches(grammar, R"({"a": 01})"));
}

struct BadSchema {
  std::string schema;
  std::string error;
};

TEST(JsonSchemaGrammar, Errors) {
  const std::vector<BadSchema> cases = {
      {R"({"type":"string","not":{"const":"a"}})", "schema #/not: keyword 'not' is not supported"},
      {R"({"properties":{"a":{"type":"array","uniqueItems":true}}})",
       "#/properties/a/uniqueItems: keyword 'uniqueItems'"},
      {R"({"type":"object","minProperties":1})", "'minProperties' is not supported"},
      {R"({"type":"number","multipleOf":2})", "'multipleOf' is not supported"},
      {R"({"type":"strin"})", "#/type: unknown type 'strin'"},
      {R"({"type":"string","format":"ipv4"})", "format 'ipv4' is not supported"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreferences are not supported"},
      {R"j({"type":"string","pattern":"a(?=b)"})j", "lookaround"},
      {R"({"type":"string","pattern":"\\bword"})", "word boundary"},
      {R"({"type":"string","pattern":"a^b"})", "inside the pattern"},
      {R"({"type":"string","pattern":"[a-"})", "unterminated character class"},
      {R"({"type":"string","pattern":"^a{888888888888}$"})",
       "#/pattern: pattern \"^a{888888888888}$\": at offset"},
      {R"({"type":"string","pattern":"^a{3,2}$"})", "n below m"},
      {R"({"type":"number","exclusiveMaximum":5.5})", "not whole numbers"},
      {R"({"type":"number","exclusiveMinimum":3,"maximum":3})", "the number bounds leave no value"},
      {R"({"type":"number","exclusiveMinimum":999999999999998,"exclusiveMaximum":999999999999999})",
       "no value of 15 significant digits"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"$ref":"http://example.com/s.json"})", "points outside the schema"},
      {R"({"$ref":"#"})", "can never complete"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
       "can never complete"},
      {R"({"anyOf":[{"$ref":"#"},{"type":"array","items":{"$ref":"#"}}]})", "left-recursive"},
      {R"({"type":"object","properties":{"x":{"$ref":"#"}},"required":["x"]})", "can never complete"},
      {R"({"allOf":[{"type":"string"},{"type":"integer"}]})",
       "allOf is supported only when every member is an object"},
      // oneOf whose branches may both match one value is refused, not loosened to anyOf.
      {R"({"oneOf":[{"type":"integer"},{"minimum":2}]})",
       "#/oneOf: oneOf needs a value to match exactly one branch, and #/oneOf/0 and #/oneOf/1 may both "
       "match"},
      {R"({"type":"string","oneOf":[{"minLength":2},{"maxLength":4}]})", "#/oneOf/0 and #/oneOf/1"},
      {R"({"oneOf":[true,true]})", "may both match"},
      {R"({"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]})",
       "may both match"},
      {R"({"oneOf":[false,false]})", "no branch accepts a value"},
      {R"({"type":"integer","anyOf":[{"$ref":"#/$defs/s"}],"$defs":{"s":{"type":"number"}}})",
       "#/anyOf/0/$ref: a branch with '$ref' that may accept types"},
      {R"({"type":"string","const":1})", "no value of const or enum satisfies the schema's type"},
      {R"({"const":"abc","maxLength":2})",
       "#/maxLength: keyword 'maxLength' beside const or enum is not supported"},
      {R"({"type":"string","allOf":[{"properties":{"a":{}}}]})", "allOf is supported only for objects"},
      {R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"required":["b"]}]})",
       "required property 'b' is forbidden by #/allOf/0's additionalProperties false"},
      {R"({"allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"minimum":2}}}]})",
       "allOf is supported only when every member is an object"},
      {R"({"allOf":[{"$ref":5},{"type":"object"}]})", "$ref must be a string"},
      {R"({"allOf":[{"if":{"maximum":0}},{"then":{"minimum":-10}}]})",
       "#/allOf/0/if: keyword 'if' is not supported"},
      {R"({"type":"object","required":["x"],"additionalProperties":false})",
       "required property 'x' is forbidden by #/additionalProperties"},
      {R"({"type":"object","properties":{"x":false},"required":["x"]})",
       "required property 'x' is forbidden by #/properties/x"},
      {R"({"enum":[]})", "enum must be a non-empty array"},
      {R"(false)", "schema false accepts no value"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "maxItems is below minItems"},
      {R"({"type":"string","maxLength":100000})", "string lengths above"},
      {R"({"type":"object",)", "schema"},
      {R"([1,2])", "a schema must be an object or a boolean"},
  };
  for (const BadSchema& c : cases) {
    Expected<Grammar> g = CompileJsonSchema(c.schema);
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_NE(g.status().message().find(c.error), std::string::npos)
        << c.schema << "\n"
        << g.status().message() << "\nexpected: " << c.error;
  }
}

TEST(JsonSchemaGrammar, SizeAndDepthAreLimited) {
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(100, '}');
  Expected<Grammar> g = CompileJsonSchema(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("deeper than"), std::string::npos) << g.status().message();

  std::string huge = R"({"enum":[")" + std::string(kMaxSchemaBytes, 'a') + R"("]})";
  g = CompileJsonSchema(huge);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("exceeds the limit"), std::string::npos);
}

TEST(IntegerRangeGbnf, MatchesExactlyTheRange) {
  const std::pair<int64_t, int64_t> ranges[] = {{0, 0},      {5, 5},      {-3, 7},    {18, 120},
                                                {-120, -18}, {0, 999},    {1, 1000},  {-1000, -1},
                                                {37, 1234},  {-1234, 56}, {100, 199}, {9, 10}};
  for (auto [lo, hi] : ranges) {
    auto g = testing::ParseOrDie("root ::= " + IntegerRangeGbnf(lo, hi));
    ASSERT_NE(g, nullptr);
    for (int64_t v = -1300; v <= 1300; ++v) {
      ASSERT_EQ(Matches(g, std::to_string(v)), v >= lo && v <= hi) << "[" << lo << ", " << hi << "] " << v;
    }
    EXPECT_FALSE(Matches(g, "-0"));
    EXPECT_FALSE(Matches(g, "007"));
  }
  auto open_above = testing::ParseOrDie("root ::= " + IntegerRangeGbnf(18, kMaxJsonInteger));
  EXPECT_TRUE(Matches(open_above, "18"));
  EXPECT_TRUE(Matches(open_above, "9999999999999999"));
  EXPECT_TRUE(Matches(open_above, "12345678"));
  EXPECT_FALSE(Matches(open_above, "17"));
  EXPECT_FALSE(Matches(open_above, "-20"));
}

TEST(RegexToGbnf, EscapesJsonSpecialCharacters) {
  Expected<std::string> g = RegexToGbnf("^\"\\\\\n$");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto grammar = testing::ParseOrDie("root ::= " + *g + "\n" + JsonPrimitiveRules());
  EXPECT_TRUE(Matches(grammar, "\\\"\\\\\\n"));
  EXPECT_FALSE(Matches(grammar, "\"\\\n"));
}

// Walks random allowed tokens of the real vocabulary to an end token,
// leaning towards closing tokens as it goes so that it ends.
std::string WalkToEnd(const std::shared_ptr<const TokenGrammar>& tg, std::mt19937& rng) {
  const GrammarVocabulary& vocab = tg->vocabulary();
  GrammarConstraint c(tg);
  std::string text;
  std::vector<uint32_t> mask;
  for (int step = 0; step < 400 && !c.finished(); ++step) {
    c.FillMask(&mask);
    std::vector<int32_t> allowed;
    std::vector<int32_t> closing;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (!((mask[id / 32] >> (id % 32)) & 1u)) continue;
      allowed.push_back(id);
      const std::string& b = vocab.bytes(id);
      if (vocab.IsEnd(id) || (!b.empty() && b.find_first_of("\"]}") != std::string::npos))
        closing.push_back(id);
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after: " << text;
      return text;
    }
    const auto& pool = (!closing.empty() && static_cast<int>(rng() % 60) < step) ? closing : allowed;
    int32_t pick = pool[rng() % pool.size()];
    EXPECT_TRUE(c.Accept(pick));
    if (!vocab.IsEnd(pick)) text += vocab.bytes(pick);
  }
  EXPECT_TRUE(c.finished()) << text;
  return text;
}

std::shared_ptr<const GrammarVocabulary> QwenVocabulary() {
  static const std::shared_ptr<const GrammarVocabulary> vocab = [] {
    auto tok = LoadTokenizer(testing::SharedDir() + "/data/tokenizers/qwen2.5");
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    return tok.ok() ? GrammarVocabulary::FromTokenizer(**tok) : nullptr;
  }();
  return vocab;
}

// Every finished walk must parse as JSON and have the schema's required keys
// with the right types.
TEST(JsonSchemaGrammarQwen, RandomWalksProduceValidJson) {
  auto vocab = QwenVocabulary();
  ASSERT_NE(vocab, nullptr);
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer", "minimum": 0},
      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
      "ok": {"type": "boolean"},
      "when": {"type": "string", "format": "date"}
    },
    "required": ["name", "age", "tags", "ok"],
    "additionalProperties": false
  })";
  auto grammar = SchemaGrammar(schema);
  ASSERT_NE(grammar, nullptr);
  auto tg = std::make_shared<TokenGrammar>(grammar, vocab);
  std::mt19937 rng(99);
  for (int walk = 0; walk < 8; ++walk) {
    std::string text = WalkToEnd(tg, rng);
    nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << text;
    ASSERT_TRUE(parsed.is_object()) << text;
    EXPECT_TRUE(parsed["name"].is_string()) << text;
    EXPECT_LE(parsed["name"].get<std::string>().size(), 12u * 4) << text;
    EXPECT_TRUE(parsed["age"].is_number_integer() && parsed["age"].get<int64_t>() >= 0) << text;
    EXPECT_TRUE(parsed["tags"].is_array() && parsed["tags"].size() <= 3) << text;
    EXPECT_TRUE(parsed["ok"].is_boolean()) << text;
    for (const auto& [key, value] : parsed.items()) {
      EXPECT_TRUE(key == "name" || key == "age" || key == "tags" || key == "ok" || key == "when") << text;
    }
  }
}

// Checks a tree {"v": 1..100, "kids": [tree, tree?]} recursively.
void ExpectTree(const nlohmann::json& node, const std::string& text) {
  ASSERT_TRUE(node.is_object()) << text;
  ASSERT_TRUE(node.contains("v") && node["v"].is_number_integer()) << text;
  EXPECT_GE(node["v"].get<int64_t>(), 1) << text;
  EXPECT_LE(node["v"].get<int64_t>(), 100) << text;
  ASSERT_TRUE(node.contains("kids") && node["kids"].is_array() && node["kids"].size() <= 2) << text;
  EXPECT_EQ(node.size(), 2u) << text;
  for (const auto& kid : node["kids"]) ExpectTree(kid, text);
}

TEST(JsonSchemaGrammarQwen, RandomWalksOfARecursiveSchema) {
  auto vocab = QwenVocabulary();
  ASSERT_NE(vocab, nullptr);
  auto grammar = SchemaGrammar(R"({
    "$defs": {"tree": {"type": "object", "properties": {
      "v": {"type": "integer", "minimum": 1, "maximum": 100},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2}},
      "required": ["v", "kids"], "additionalProperties": false}},
    "$ref": "#/$defs/tree"})");
  ASSERT_NE(grammar, nullptr);
  auto tg = std::make_shared<TokenGrammar>(grammar, vocab);
  std::mt19937 rng(5);
  for (int walk = 0; walk < 8; ++walk) {
    std::string text = WalkToEnd(tg, rng);
    nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << text;
    ExpectTree(parsed, text);
  }
}

}  // namespace json_schema_grammar_tests
}  // namespace kiln
