// Structured output fields of a request: response_format's three types,
// llama.cpp's grammar and json_schema, the 400s naming the field at fault,
// the schema's key order kept from the body's text, and the field named
// when the engine refuses a constraint.
#include "server/response_format.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/json_schema_grammar.h"
#include "server/completion_request.h"

namespace kiln::server {
namespace response_format_tests {

using nlohmann::json;

json Body(json fields) {
  fields["messages"] = json::array({{{"role", "user"}, {"content", "Hi"}}});
  return fields;
}

TEST(ResponseFormatTest, TextConstrainsNothing) {
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(Body({{"response_format", {{"type", "text"}}}}), &r));
  EXPECT_FALSE(r.params.constrained());
  EXPECT_EQ(r.constraint_field, "");
}

TEST(ResponseFormatTest, JsonObject) {
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(Body({{"response_format", {{"type", "json_object"}}}}), &r));
  EXPECT_TRUE(r.params.json_object);
  EXPECT_EQ(r.params.json_schema, "");
  EXPECT_EQ(r.constraint_field, "response_format");
}

TEST(ResponseFormatTest, JsonSchemaEnforcedWhetherStrictOrNot) {
  for (bool strict : {true, false}) {
    CompletionRequest r;
    json format = {{"type", "json_schema"},
                   {"json_schema",
                    {{"name", "answer"},
                     {"description", "the answer"},
                     {"strict", strict},
                     {"schema", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}}}};
    ASSERT_FALSE(ParseChatRequest(Body({{"response_format", format}}), &r));
    EXPECT_EQ(json::parse(r.params.json_schema), format["json_schema"]["schema"]);
    EXPECT_FALSE(r.params.json_object);
    EXPECT_EQ(r.constraint_field, "response_format");
  }
}

TEST(ResponseFormatTest, BooleanSchemaAndLlamaCppJsonObjectSchema) {
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(
      Body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", true}}}}}}), &r));
  EXPECT_EQ(r.params.json_schema, "true");
  ASSERT_FALSE(ParseChatRequest(
      Body({{"response_format", {{"type", "json_object"}, {"schema", {{"type", "string"}}}}}}), &r));
  EXPECT_EQ(r.params.json_schema, R"({"type":"string"})");
  EXPECT_FALSE(r.params.json_object);
}

TEST(ResponseFormatTest, LlamaCppGrammarAndJsonSchemaFields) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest({{"prompt", "x"}, {"grammar", "root ::= \"yes\" | \"no\""}}, &r));
  EXPECT_EQ(r.params.grammar, "root ::= \"yes\" | \"no\"");
  EXPECT_EQ(r.constraint_field, "grammar");
  CompletionRequest s;
  ASSERT_FALSE(ParseCompletionRequest({{"prompt", "x"}, {"json_schema", {{"type", "integer"}}}}, &s));
  EXPECT_EQ(s.params.json_schema, R"({"type":"integer"})");
  EXPECT_TRUE(s.params.grammar.empty());
  EXPECT_EQ(s.constraint_field, "json_schema");
  // What llama.cpp clients send for "none".
  CompletionRequest none;
  ASSERT_FALSE(
      ParseCompletionRequest({{"prompt", "x"}, {"grammar", ""}, {"json_schema", json::object()}}, &none));
  EXPECT_FALSE(none.params.constrained());
  EXPECT_EQ(none.constraint_field, "");
}

struct BadFormat {
  json fields;
  std::string param;
  std::string words;
};

TEST(ResponseFormatTest, MalformedFieldsAreRefusedByName) {
  const json schema = {{"type", "integer"}};
  const std::vector<BadFormat> cases = {
      {{{"response_format", "json"}}, "response_format", "expected an object, got string"},
      {{{"response_format", json::object()}}, "response_format.type", "is required"},
      {{{"response_format", {{"type", 3}}}}, "response_format.type", "expected a string"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type", "text, json_object or json_schema"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema", "is required"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", "x"}}}},
       "response_format.json_schema",
       "expected an object"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}}}}}},
       "response_format.json_schema.schema",
       "is required"},
      {{{"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"schema", schema}, {"strict", "yes"}}}}}},
       "response_format.json_schema.strict",
       "expected a boolean"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}, {"name", 1}}}}}},
       "response_format.json_schema.name",
       "expected a string"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", json::array({1})}}}}}},
       "response_format.json_schema.schema",
       "a schema must be an object or a boolean"},
      {{{"grammar", 5}}, "grammar", "expected a string"},
      {{{"json_schema", "{}"}}, "json_schema", "a schema must be an object or a boolean"},
      {{{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}},
       "grammar",
       "cannot be combined with response_format"},
      {{{"grammar", "root ::= \"a\""}, {"json_schema", schema}},
       "json_schema",
       "cannot be combined with grammar"},
  };
  for (const BadFormat& c : cases) {
    SCOPED_TRACE(c.fields.dump());
    CompletionRequest r;
    ApiStatus e = ParseChatRequest(Body(c.fields), &r);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, c.param);
    EXPECT_NE(e->message.find(c.words), std::string::npos) << e->message;
  }
}

TEST(ResponseFormatTest, SizesAreLimited) {
  json big = {{"enum", json::array({std::string(kMaxSchemaBytes, 'a')})}};
  CompletionRequest r;
  ApiStatus e = ParseChatRequest(
      Body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", big}}}}}}), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format.json_schema.schema");
  EXPECT_NE(e->message.find("over the limit of 262144"), std::string::npos) << e->message;

  e = ParseChatRequest(Body({{"json_schema", big}}), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "json_schema");

  std::string grammar = "root ::= \"" + std::string(kMaxGrammarTextBytes, 'a') + "\"";
  e = ParseChatRequest(Body({{"grammar", grammar}}), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "grammar");
  EXPECT_NE(e->message.find("over the limit"), std::string::npos) << e->message;
}

TEST(ResponseFormatTest, SchemaKeysKeepTheBodysOrder) {
  const std::string body = R"({"messages":[{"role":"user","content":"Hi"}],
    "response_format":{"type":"json_schema","json_schema":{"name":"x","schema":
      {"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},
       "required":["zeta","alpha"]}}}})";
  CompletionRequest r;
  ASSERT_FALSE(ParseChatRequest(json::parse(body), &r));
  // Read through the order-free parse, the keys come sorted ...
  EXPECT_LT(r.params.json_schema.find("alpha"), r.params.json_schema.find("zeta"));
  KeepSchemaKeyOrder(body, r.constraint_field, &r.params);
  // ... and in the body's order once kept.
  EXPECT_EQ(r.params.json_schema,
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},)"
            R"("required":["zeta","alpha"]})");

  const std::string llama = R"({"prompt":"x","json_schema":{"properties":{"b":{},"a":{}}}})";
  ASSERT_FALSE(ParseCompletionRequest(json::parse(llama), &r));
  KeepSchemaKeyOrder(llama, r.constraint_field, &r.params);
  EXPECT_EQ(r.params.json_schema, R"({"properties":{"b":{},"a":{}}})");

  const std::string object =
      R"({"prompt":"x","response_format":{"type":"json_object","schema":{"properties":{"b":{},"a":{}}}}})";
  ASSERT_FALSE(ParseCompletionRequest(json::parse(object), &r));
  KeepSchemaKeyOrder(object, r.constraint_field, &r.params);
  EXPECT_EQ(r.params.json_schema, R"({"properties":{"b":{},"a":{}}})");
}

TEST(ResponseFormatTest, EngineRefusalsNameTheConstraintsField) {
  Status schema = InvalidArgument("json_schema: schema #/not: keyword 'not' is not supported");
  Status grammar = InvalidArgument("grammar: line 1, column 3: expected ::=");
  EXPECT_EQ(ConstraintErrorField(schema, "response_format"), "response_format");
  EXPECT_EQ(ConstraintErrorField(schema, "json_schema"), "json_schema");
  EXPECT_EQ(ConstraintErrorField(grammar, "grammar"), "grammar");
  EXPECT_EQ(ConstraintErrorField(schema, ""), "response_format");
  EXPECT_EQ(ConstraintErrorField(grammar, ""), "grammar");
  EXPECT_EQ(ConstraintErrorField(InvalidArgument("max_tokens must be >= 1"), "response_format"), "");
  ApiError e = ErrorFromStatus(schema, ConstraintErrorField(schema, "response_format"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "response_format");
}

}  // namespace response_format_tests
}  // namespace kiln::server
