// The tool-call grammars: they parse, admit well-formed calls of the
// declared tools whose arguments fit the schema, and nothing else.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <memory>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"

namespace kiln::server {
namespace tool_call_grammar_tests {

using OJson = nlohmann::ordered_json;

ToolRequest TwoTools(ToolChoiceMode choice, bool parallel = true) {
  ToolRequest r;
  OJson body = OJson::parse(R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}},
      "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "count", "parameters": {"$defs": {"n": {"type": "integer",
      "minimum": 0, "maximum": 9}}, "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}},
      "required": ["n"], "additionalProperties": false}}}]})");
  EXPECT_FALSE(ParseToolRequest(body, &r));
  r.choice = choice;
  if (choice == ToolChoiceMode::kNamed) r.choice_name = "count";
  r.parallel = parallel;
  return r;
}

std::shared_ptr<const Grammar> Build(const ToolRequest& r, ToolCallFormat format, ThinkingMode thinking,
                                     ToolCallGrammar* out) {
  ApiStatus e = BuildToolCallGrammar(r, format, thinking, "", out);
  EXPECT_FALSE(e) << e->message;
  Expected<Grammar> g = ParseGbnf(out->gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << out->gbnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

const char* kWeather = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\"}}\n</tool_call>";
const char* kCount = "<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 7}}\n</tool_call>";

TEST(ToolCallGrammarTest, RequiredHermesAdmitsCallsOfTheTools) {
  ToolCallGrammar out;
  auto g = Build(TwoTools(ToolChoiceMode::kRequired), ToolCallFormat::kHermes, ThinkingMode::kNone, &out);
  ASSERT_TRUE(g);
  EXPECT_TRUE(out.triggers.empty());
  EXPECT_TRUE(Matches(g, kWeather));
  EXPECT_TRUE(Matches(g, kCount));
  EXPECT_TRUE(Matches(g, std::string(kWeather) + "\n" + kCount));
  EXPECT_FALSE(Matches(g, "Hello"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  // Arguments hold to each tool's own schema ($ref included).
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 12}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\": \"count\", \"arguments\": {\"city\": \"Bern\"}}\n</tool_call>"));
  EXPECT_FALSE(
      Matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\", \"x\": 1}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\"}}"));
}

TEST(ToolCallGrammarTest, NamedAndSingleCalls) {
  ToolCallGrammar out;
  auto g = Build(TwoTools(ToolChoiceMode::kNamed, /*parallel=*/false), ToolCallFormat::kHermes,
                 ThinkingMode::kNone, &out);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, kCount));
  EXPECT_FALSE(Matches(g, kWeather));
  EXPECT_FALSE(Matches(g, std::string(kCount) + "\n" + kCount));
}

TEST(ToolCallGrammarTest, AutoIsLazyFromTheTrigger) {
  ToolCallGrammar out;
  auto g = Build(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kHermes, ThinkingMode::kOptional, &out);
  ASSERT_TRUE(g);
  EXPECT_EQ(out.triggers, std::vector<std::string>{"<tool_call>"});
  // The grammar starts at the trigger's first byte.
  EXPECT_TRUE(Matches(g, kWeather));
  for (const std::string& t : out.triggers) {
    GrammarMatcher m(g);
    EXPECT_TRUE(m.AcceptBytes(t));
  }
}

TEST(ToolCallGrammarTest, ThinkBlockMayComeFirst) {
  ToolCallGrammar out;
  auto g = Build(TwoTools(ToolChoiceMode::kRequired), ToolCallFormat::kHermes, ThinkingMode::kOptional, &out);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, kCount));
  EXPECT_TRUE(Matches(g, std::string("<think>\nI should count <b>.\n</think>\n\n") + kCount));
  EXPECT_FALSE(Matches(g, std::string("<think>\nno end\n") + kCount));
  g = Build(TwoTools(ToolChoiceMode::kRequired), ToolCallFormat::kHermes, ThinkingMode::kInside, &out);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, std::string("thinking\n</think>\n\n") + kCount));
  EXPECT_FALSE(Matches(g, kCount));
}

TEST(ToolCallGrammarTest, LlamaAndMistralShapes) {
  ToolCallGrammar out;
  auto g = Build(TwoTools(ToolChoiceMode::kRequired), ToolCallFormat::kLlama3Json, ThinkingMode::kNone, &out);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, "{\"name\": \"count\", \"parameters\": {\"n\": 1}}"));
  EXPECT_TRUE(Matches(g, "{\"name\": \"count\", \"parameters\": {\"n\": 1}}; {\"name\": \"get_weather\", "
                         "\"parameters\": {\"city\": \"a\"}}"));
  EXPECT_FALSE(Matches(g, "{\"name\": \"count\", \"arguments\": {\"n\": 1}}"));
  g = Build(TwoTools(ToolChoiceMode::kRequired), ToolCallFormat::kMistral, ThinkingMode::kNone, &out);
  ASSERT_TRUE(g);
  EXPECT_TRUE(Matches(g, "[TOOL_CALLS] [{\"name\": \"count\", \"arguments\": {\"n\": 1}}]"));
  EXPECT_TRUE(Matches(g, "[TOOL_CALLS] [{\"name\": \"count\", \"arguments\": {\"n\": 1}}, {\"name\": \"count\", "
                         "\"arguments\": {\"n\": 2}}]"));
  EXPECT_FALSE(Matches(g, "[{\"name\": \"count\", \"arguments\": {\"n\": 1}}]"));
  Build(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kMistral, ThinkingMode::kNone, &out);
  EXPECT_EQ(out.triggers, std::vector<std::string>{"[TOOL_CALLS]"});
}

TEST(ToolCallGrammarTest, AnAnswerGrammarIsTheOtherWayUnderAuto) {
  // Rule names that the tool grammar also uses stay apart.
  const std::string answer = "root ::= tool-call | \"no\"\ntool-call ::= \"yes\"\n";
  ToolCallGrammar out;
  ApiStatus e = BuildToolCallGrammar(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kHermes, ThinkingMode::kNone,
                                     answer, &out);
  ASSERT_FALSE(e) << e->message;
  EXPECT_TRUE(out.triggers.empty());  // from the first byte: the answer is constrained too
  auto g = std::make_shared<const Grammar>(*ParseGbnf(out.gbnf));
  EXPECT_TRUE(Matches(g, "yes"));
  EXPECT_TRUE(Matches(g, "no"));
  EXPECT_TRUE(Matches(g, kCount));
  EXPECT_FALSE(Matches(g, "maybe"));
  // Required: calls only.
  e = BuildToolCallGrammar(TwoTools(ToolChoiceMode::kRequired), ToolCallFormat::kHermes, ThinkingMode::kNone, answer,
                           &out);
  ASSERT_FALSE(e);
  g = std::make_shared<const Grammar>(*ParseGbnf(out.gbnf));
  EXPECT_FALSE(Matches(g, "yes"));
  EXPECT_TRUE(Matches(g, kCount));
}

TEST(ToolCallGrammarTest, ApplyingJoinsTheAnswerConstraint) {
  SamplingParams params;
  params.json_schema = R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                           "additionalProperties": false})";
  ASSERT_FALSE(ApplyToolCallConstraint(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kHermes, ThinkingMode::kNone,
                                       &params));
  EXPECT_TRUE(params.json_schema.empty());
  EXPECT_TRUE(params.grammar_triggers.empty());
  EXPECT_TRUE(params.Validate().ok());
  auto g = std::make_shared<const Grammar>(*ParseGbnf(params.grammar));
  EXPECT_TRUE(Matches(g, "{\"ok\": true}"));
  EXPECT_TRUE(Matches(g, kCount));
  EXPECT_FALSE(Matches(g, "{\"ok\": 1}"));

  SamplingParams plain;
  ASSERT_FALSE(ApplyToolCallConstraint(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kHermes,
                                       ThinkingMode::kNone, &plain));
  EXPECT_EQ(plain.grammar_triggers, std::vector<std::string>{"<tool_call>"});
  EXPECT_TRUE(plain.Validate().ok());

  SamplingParams object;
  object.json_object = true;
  ASSERT_FALSE(ApplyToolCallConstraint(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kHermes,
                                       ThinkingMode::kNone, &object));
  EXPECT_FALSE(object.json_object);
  g = std::make_shared<const Grammar>(*ParseGbnf(object.grammar));
  EXPECT_TRUE(Matches(g, "{\"any\": [1]}"));

  SamplingParams bad;
  bad.grammar = "root ::= (";
  ApiStatus e = ApplyToolCallConstraint(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kHermes,
                                        ThinkingMode::kNone, &bad);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "grammar");
  bad = SamplingParams();
  bad.json_schema = R"({"type": "object", "not": {}})";
  e = ApplyToolCallConstraint(TwoTools(ToolChoiceMode::kAuto), ToolCallFormat::kHermes, ThinkingMode::kNone, &bad);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format");
}

TEST(ToolCallGrammarTest, UnsupportedSchemaNamesTheTool) {
  ToolRequest r = TwoTools(ToolChoiceMode::kRequired);
  r.tools[1].parameters = OJson::parse(R"({"type": "object", "not": {"required": ["a"]}})");
  ToolCallGrammar out;
  ApiStatus e = BuildToolCallGrammar(r, ToolCallFormat::kHermes, ThinkingMode::kNone, "", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools[1].function.parameters");
  EXPECT_NE(e->message.find("not"), std::string::npos) << e->message;
  // A $ref cycle that can never end.
  r.tools[1].parameters = OJson::parse(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})");
  e = BuildToolCallGrammar(r, ToolCallFormat::kHermes, ThinkingMode::kNone, "", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools[1].function.parameters");
  EXPECT_EQ(e->message.rfind("tools[1].function.parameters: ", 0), 0u) << e->message;
}

TEST(ToolCallGrammarTest, PrefixingRenamesRulesOnly) {
  EXPECT_EQ(PrefixGbnfRules("root ::= a-b \"root x\" [a-z]{1,3} # root\na-b ::= [\\]x] \"\\\"q\"\n", "t-"),
            "t-root ::= t-a-b \"root x\" [a-z]{1,3} # root\nt-a-b ::= [\\]x] \"\\\"q\"\n");
}

}  // namespace tool_call_grammar_tests
}  // namespace kiln::server
