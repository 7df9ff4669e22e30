// Structured output through the engine: the tiny models write random text,
// so every property checked here is the constraint's doing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/output_constraint.h"
#include "engine_test_util.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_vocabulary.h"
#include "grammar/token_grammar.h"

namespace kiln {
namespace structured_output_tests {

using engine_test::EngineOrDie;
using engine_test::LoadOrDie;
using engine_test::TinyOptions;

class StructuredOutput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    options_ = new EngineOptions(TinyOptions("tiny-qwen2"));
    model_ = new LoadedModel(LoadOrDie(*options_));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete options_;
  }
  std::unique_ptr<LLMEngine> Engine() { return EngineOrDie(*model_, *options_); }

  static GenerationRequest Sampled(uint64_t seed, int32_t max_tokens) {
    GenerationRequest r;
    r.prompt = "Write the answer:";
    r.params.temperature = 1.0;
    r.params.seed = seed;
    r.params.max_tokens = max_tokens;
    return r;
  }

  static EngineOptions* options_;
  static LoadedModel* model_;
};
EngineOptions* StructuredOutput::options_ = nullptr;
LoadedModel* StructuredOutput::model_ = nullptr;

TEST_F(StructuredOutput, JsonSchemaOutputsParseAndHoldTheSchema) {
  auto engine = Engine();
  ASSERT_NE(engine, nullptr);
  const std::string schema = R"({"type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8},
                   "age": {"type": "integer", "minimum": 0, "maximum": 120},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
    "required": ["name", "age", "tags"], "additionalProperties": false})";
  std::vector<GenerationRequest> requests;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GenerationRequest r = Sampled(seed, 200);
    r.params.json_schema = schema;
    requests.push_back(r);
  }
  // An unconstrained greedy request in the same batch is unaffected.
  GenerationRequest free_request = engine_test::GreedyIds({1, 2, 3, 4}, 12);
  requests.push_back(free_request);
  auto results = engine->Generate(requests);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  for (size_t i = 0; i + 1 < results->size(); ++i) {
    const GenerationResult& out = (*results)[i];
    ASSERT_EQ(out.stats.finish_reason, FinishReason::kStop) << out.text;
    auto json = nlohmann::json::parse(out.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(json.is_discarded()) << out.text;
    ASSERT_TRUE(json.is_object()) << out.text;
    EXPECT_EQ(json.size(), 3u) << out.text;
    ASSERT_TRUE(json["name"].is_string()) << out.text;
    EXPECT_LE(json["name"].get<std::string>().size(), 8u) << out.text;
    ASSERT_TRUE(json["age"].is_number_integer()) << out.text;
    EXPECT_GE(json["age"].get<int>(), 0);
    EXPECT_LE(json["age"].get<int>(), 120);
    ASSERT_TRUE(json["tags"].is_array()) << out.text;
    EXPECT_LE(json["tags"].size(), 3u);
    for (const auto& t : json["tags"]) EXPECT_TRUE(t == "a" || t == "b") << out.text;
  }
  auto alone = Engine()->Generate({free_request});
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(results->back().output_ids, (*alone)[0].output_ids);
}

TEST_F(StructuredOutput, AGbnfGrammarDecidesTheWholeText) {
  auto engine = Engine();
  ASSERT_NE(engine, nullptr);
  std::vector<GenerationRequest> requests;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    GenerationRequest r = Sampled(seed, 50);
    r.params.grammar = R"(root ::= ("yes" | "no") " " [0-9]{2})";
    requests.push_back(r);
  }
  GenerationRequest greedy = requests[0];
  greedy.params.temperature = 0;
  requests.push_back(greedy);
  auto results = engine->Generate(requests);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  for (const GenerationResult& out : *results) {
    EXPECT_EQ(out.stats.finish_reason, FinishReason::kStop);
    EXPECT_TRUE(out.text.size() == 6 || out.text.size() == 5) << out.text;
    EXPECT_TRUE(out.text.rfind("yes ", 0) == 0 || out.text.rfind("no ", 0) == 0) << out.text;
  }
}

TEST_F(StructuredOutput, RunningOutOfTokensEndsWithLengthAndTheTextSoFar) {
  auto engine = Engine();
  ASSERT_NE(engine, nullptr);
  GenerationRequest r = Sampled(3, 5);
  r.params.json_object = true;
  auto results = engine->Generate({r});
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  const GenerationResult& out = (*results)[0];
  EXPECT_EQ(out.stats.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.output_ids.size(), 5u);
  ASSERT_FALSE(out.text.empty());
  EXPECT_EQ(out.text[0], '{') << out.text;
}

TEST_F(StructuredOutput, AGrammarThatCannotGoOnEndsTheRequestWithStop) {
  auto engine = Engine();
  ASSERT_NE(engine, nullptr);
  GenerationRequest r = Sampled(5, 20);
  r.params.grammar = R"(root ::= "ok")";
  r.params.ignore_eos = true;  // the end token does not stop it: the grammar's dead end must
  auto results = engine->Generate({r});
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  const GenerationResult& out = (*results)[0];
  EXPECT_EQ(out.stats.finish_reason, FinishReason::kStop);
  EXPECT_EQ(out.text, "ok");
  EXPECT_LT(out.output_ids.size(), 20u);
}

TEST_F(StructuredOutput, BadConstraintsAreRefusedNamingTheField) {
  auto engine = Engine();
  ASSERT_NE(engine, nullptr);
  GenerationRequest r = Sampled(1, 8);
  r.params.json_schema = R"({"type": "object", "not": {}})";
  auto id = engine->AddRequest(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message().rfind("json_schema: ", 0), 0u) << id.status().message();
  EXPECT_NE(id.status().message().find("not"), std::string::npos) << id.status().message();

  r.params.json_schema = R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})";
  id = engine->AddRequest(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message().rfind("json_schema: ", 0), 0u) << id.status().message();

  r.params.json_schema.clear();
  r.params.grammar = "root ::= missing";
  id = engine->AddRequest(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message().rfind("grammar: ", 0), 0u) << id.status().message();

  r.params.json_object = true;
  id = engine->AddRequest(r);
  ASSERT_FALSE(id.ok()) << "two constraints at once";
  EXPECT_FALSE(engine->HasUnfinishedRequests());
}

// Speculative decoding under a grammar: n-gram drafts (the prompt is JSON
// said three times, so drafts are found) are cut to what the grammar allows
// and verified under each row's mask; greedy output is byte for byte what
// it is without speculation, and sampled output still parses.
TEST_F(StructuredOutput, NgramSpeculationFollowsTheGrammarAndChangesNoGreedyOutput) {
  const std::string schema = R"({"type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12},
                   "tags": {"type": "array", "items": {"enum": ["alpha", "beta", "gamma"]}, "maxItems": 12}},
    "required": ["name", "tags"], "additionalProperties": false})";
  const std::string example =
      R"({"name": "beta gamma", "tags": ["alpha", "beta", "gamma", "alpha", "beta"]})";
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.prompt = example + "\n" + example + "\n" + example.substr(0, static_cast<size_t>(10 + 7 * i));
    r.params.temperature = i < 4 ? 0.0 : 0.8;
    r.params.seed = static_cast<uint64_t>(i);
    r.params.max_tokens = 120;
    r.params.json_schema = schema;
    requests.push_back(r);
  }
  auto plain = Engine()->Generate(requests);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EngineOptions spec = *options_;
  spec.spec_method = "ngram";
  spec.spec_tokens = 6;
  spec.spec_max_batch = 0;  // all six speculate together
  // Draft lengths that follow acceptance alone: with the costs measured as
  // it runs, a slow build (the sanitizers') drafted too little to count.
  spec.spec_measure_costs = false;
  auto engine = EngineOrDie(*model_, spec);
  ASSERT_NE(engine, nullptr);
  auto drafted = engine->Generate(requests);
  ASSERT_TRUE(drafted.ok()) << drafted.status().ToString();
  const EngineCounters c = engine->Counters();
  EXPECT_GT(c.spec_draft_tokens, 20);
  EXPECT_GT(c.spec_accepted_tokens, 10);
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationResult& out = (*drafted)[i];
    if (requests[i].params.temperature == 0) {
      EXPECT_EQ(out.output_ids, (*plain)[i].output_ids) << i;
      EXPECT_EQ(out.text, (*plain)[i].text) << i;
    }
    if (out.stats.finish_reason != FinishReason::kStop) continue;  // a sampled text may run out of tokens
    auto json = nlohmann::json::parse(out.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(json.is_discarded()) << out.text;
    ASSERT_TRUE(json.is_object()) << out.text;
    ASSERT_TRUE(json["tags"].is_array()) << out.text;
    for (const auto& t : json["tags"]) EXPECT_TRUE(t == "alpha" || t == "beta" || t == "gamma") << out.text;
  }
}

// A grammar cuts a draft at its first forbidden token and is left as it
// was.
TEST(OutputConstraintTest, AllowedPrefixCountsTheDraftTokensTheGrammarTakes) {
  std::vector<std::string> pieces = {"{", "}", "a", "b", ""};
  auto vocab = std::make_shared<const GrammarVocabulary>(pieces, std::vector<int32_t>{4});
  auto grammar = ParseGbnf(R"(root ::= "{" "a"* "}")");
  ASSERT_TRUE(grammar.ok()) << grammar.status().ToString();
  auto tg = std::make_shared<const TokenGrammar>(std::make_shared<const Grammar>(std::move(*grammar)), vocab);
  OutputConstraint c(tg, {});
  EXPECT_EQ(c.AllowedPrefix(std::vector<int32_t>{0, 2, 2, 3, 1}), 3u);  // "b" is not allowed
  EXPECT_EQ(c.AllowedPrefix(std::vector<int32_t>{1}), 0u);              // "}" cannot come first
  EXPECT_EQ(c.AllowedPrefix(std::vector<int32_t>{0, 1, 4}), 3u);        // then the end token
  // Nothing was accepted: "{" is still the only token allowed.
  std::vector<uint32_t> mask;
  c.FillMask(&mask);
  EXPECT_EQ(mask[0], 1u << 0);
  EXPECT_TRUE(c.Accept(0));
  EXPECT_EQ(c.AllowedPrefix(std::vector<int32_t>{2, 1}), 2u);
  EXPECT_TRUE(c.Accept(1));
  EXPECT_TRUE(c.Rollback(2));  // both accepted tokens remembered, despite the walks
}

// A lazy constraint over a small vocabulary: free until the trigger, then
// the grammar's from the trigger's first byte, even when the trigger is
// split across tokens and text precedes it in the same token.
TEST(OutputConstraintTest, ALazyConstraintStartsAtItsTrigger) {
  std::vector<std::string> pieces = {"hello ", "<to", "ol>", "x<tool>", "{", "}", "a", "</tool>", ""};
  auto vocab = std::make_shared<const GrammarVocabulary>(pieces, std::vector<int32_t>{8});
  auto grammar = ParseGbnf(R"(root ::= "<tool>" "{" "a"* "}" "</tool>")");
  ASSERT_TRUE(grammar.ok()) << grammar.status().ToString();
  auto tg = std::make_shared<const TokenGrammar>(std::make_shared<const Grammar>(std::move(*grammar)), vocab);

  OutputConstraint split(tg, {"<tool>"});
  EXPECT_FALSE(split.active());
  EXPECT_TRUE(split.Accept(0));  // "hello "
  EXPECT_TRUE(split.Accept(6));  // "a": free text
  EXPECT_TRUE(split.Accept(1));  // "<to"
  EXPECT_FALSE(split.active());
  EXPECT_TRUE(split.Accept(2));  // "ol>" completes the trigger
  ASSERT_TRUE(split.active());
  std::vector<uint32_t> mask;
  split.FillMask(&mask);
  EXPECT_EQ(mask[0], 1u << 4) << "only '{' may follow the trigger";
  EXPECT_FALSE(split.Accept(5));
  EXPECT_TRUE(split.Accept(4));
  EXPECT_TRUE(split.Accept(6));
  EXPECT_TRUE(split.Rollback(1));
  EXPECT_FALSE(split.Rollback(2)) << "not back past the trigger";
  EXPECT_TRUE(split.Accept(5));
  EXPECT_TRUE(split.Accept(7));
  EXPECT_TRUE(split.Accept(8));
  EXPECT_TRUE(split.finished());

  OutputConstraint inside(tg, {"<tool>"});
  EXPECT_TRUE(inside.Accept(3));  // "x<tool>": the trigger after free text in one token
  ASSERT_TRUE(inside.active());
  EXPECT_TRUE(inside.abandoned().empty());

  // Without triggers the grammar holds from the start.
  OutputConstraint eager(tg, {});
  EXPECT_TRUE(eager.active());
  EXPECT_FALSE(eager.Accept(0));
}

}  // namespace structured_output_tests
}  // namespace kiln
