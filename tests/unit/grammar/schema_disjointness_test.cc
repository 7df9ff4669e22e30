// The proofs that two schemas share no value, which make oneOf exact: each
// "disjoint" must be true (a value valid under both would break oneOf),
// and the common discriminated unions must be proven.
#include "grammar/schema_disjointness.h"

#include <gtest/gtest.h>

namespace kiln {
namespace schema_disjointness_tests {

using Json = nlohmann::ordered_json;

const SchemaRefResolver kNoRefs = [](const std::string&) -> const Json* { return nullptr; };

bool Disjoint(const char* a, const char* b) {
  bool forward = SchemasProvablyDisjoint(Json::parse(a), Json::parse(b), kNoRefs);
  bool backward = SchemasProvablyDisjoint(Json::parse(b), Json::parse(a), kNoRefs);
  EXPECT_EQ(forward, backward) << a << " vs " << b;
  return forward;
}

TEST(SchemaDisjointness, ProvenWhenNoValueFitsBoth) {
  EXPECT_TRUE(Disjoint(R"({"type":"string"})", R"({"type":"integer"})"));
  EXPECT_TRUE(Disjoint(R"({"type":["string","null"]})", R"({"type":"object"})"));
  EXPECT_TRUE(Disjoint(R"({"const":1})", R"({"const":2})"));
  EXPECT_TRUE(Disjoint(R"({"enum":["a","b"]})", R"({"enum":["c",1]})"));
  EXPECT_TRUE(Disjoint(R"({"const":"a"})", R"({"type":"string","maxLength":0})"));
  EXPECT_TRUE(Disjoint(R"({"type":"number","maximum":0})", R"({"type":"number","exclusiveMinimum":0})"));
  EXPECT_TRUE(Disjoint(R"({"type":"string","maxLength":3})", R"({"type":"string","minLength":4})"));
  EXPECT_TRUE(Disjoint(R"({"type":"array","maxItems":1})", R"({"type":"array","minItems":2})"));
  EXPECT_TRUE(Disjoint("false", R"({})"));
  // Discriminated unions: a required property with different constants ...
  EXPECT_TRUE(Disjoint(R"({"type":"object","properties":{"kind":{"const":"cat"}},"required":["kind"]})",
                       R"({"type":"object","properties":{"kind":{"const":"dog"}},"required":["kind"]})"));
  // ... or one that the other forbids.
  EXPECT_TRUE(Disjoint(R"({"type":"object","required":["a"]})",
                       R"({"type":"object","properties":{"b":{}},"additionalProperties":false})"));
  EXPECT_TRUE(
      Disjoint(R"({"type":"object","required":["a"]})", R"({"type":"object","properties":{"a":false}})"));
  EXPECT_TRUE(Disjoint(R"({"anyOf":[{"type":"string"},{"type":"null"}]})", R"({"type":"boolean"})"));
}

TEST(SchemaDisjointness, NotProvenWhenAValueFitsBoth) {
  EXPECT_FALSE(Disjoint(R"({"type":"integer"})", R"({"minimum":2})"));                 // 3
  EXPECT_FALSE(Disjoint(R"({"type":"integer"})", R"({"type":"number"})"));             // 1
  EXPECT_FALSE(Disjoint(R"({"const":1})", R"({"const":1.0})"));                        // the same number
  EXPECT_FALSE(Disjoint(R"({"const":{"a":1,"b":2}})", R"({"const":{"b":2,"a":1}})"));  // the same object
  EXPECT_FALSE(Disjoint(R"({"minLength":2})", R"({"maxLength":4})"));                  // "abc"
  EXPECT_FALSE(Disjoint("true", "true"));
  EXPECT_FALSE(Disjoint(R"({"type":"object","required":["a"]})", R"({"type":"object","required":["b"]})"));
  EXPECT_FALSE(Disjoint(R"({"type":"number","maximum":0})", R"({"type":"number","minimum":0})"));  // 0
  // Without `type`, a schema of object keywords still accepts every string.
  EXPECT_FALSE(
      Disjoint(R"({"properties":{"a":{"type":"integer"}},"required":["a"]})", R"({"type":"string"})"));
  EXPECT_FALSE(Disjoint(R"({"type":"null"})", R"({"type":"null"})"));
}

TEST(SchemaDisjointness, RefsAreFollowed) {
  const Json root = Json::parse(R"({"$defs":{"s":{"type":"string"},"n":{"type":"integer"}}})");
  SchemaRefResolver resolve = [&](const std::string& ref) -> const Json* {
    if (ref == "#/$defs/s") return &root["$defs"]["s"];
    if (ref == "#/$defs/n") return &root["$defs"]["n"];
    return nullptr;
  };
  EXPECT_TRUE(SchemasProvablyDisjoint(Json::parse(R"({"$ref":"#/$defs/s"})"),
                                      Json::parse(R"({"$ref":"#/$defs/n"})"), resolve));
  EXPECT_FALSE(SchemasProvablyDisjoint(Json::parse(R"({"$ref":"#/$defs/s"})"),
                                       Json::parse(R"({"$ref":"#/$defs/missing"})"), resolve));
}

TEST(SchemaDisjointness, InvalidValues) {
  auto invalid = [](const char* value, const char* schema) {
    return ValueProvablyInvalid(Json::parse(value), Json::parse(schema), kNoRefs);
  };
  EXPECT_TRUE(invalid("1.5", R"({"type":"integer"})"));
  EXPECT_FALSE(invalid("1.0", R"({"type":"integer"})"));
  EXPECT_TRUE(invalid(R"("abc")", R"({"maxLength":2})"));
  EXPECT_FALSE(invalid(R"("éé")", R"({"maxLength":2})"));  // code points, not bytes
  EXPECT_TRUE(invalid(R"({"a":1})", R"({"required":["b"]})"));
  EXPECT_TRUE(invalid(R"({"a":"x"})", R"({"properties":{"a":{"type":"integer"}}})"));
  EXPECT_TRUE(invalid("5", R"({"exclusiveMaximum":5})"));
  EXPECT_FALSE(invalid("[1,2]", R"({"items":{"type":"integer"},"maxItems":2})"));
}

}  // namespace schema_disjointness_tests
}  // namespace kiln
