// The cost of a grammar's token mask over Qwen2.5's 151k-token vocabulary:
// computed afresh (a state never seen) and from the per-state cache, at the
// states a JSON-schema output passes through. The engine computes masks
// while the forward pass runs (the latency benchmark's --json-schema shows
// what remains of them in TPOT). Needs ../shared (or $KILN_SHARED_DIR).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "grammar/grammar_constraint.h"
#include "grammar/grammar_vocabulary.h"
#include "grammar/json_schema_grammar.h"
#include "grammar/token_grammar.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

std::string SharedDir() {
  const char* dir = std::getenv("KILN_SHARED_DIR");
  return dir != nullptr ? dir : "../shared";
}

const std::shared_ptr<const GrammarVocabulary>& QwenVocabulary() {
  static const std::shared_ptr<const GrammarVocabulary> vocab = [] {
    auto tokenizer = LoadTokenizer(SharedDir() + "/data/tokenizers/qwen2.5");
    if (!tokenizer.ok()) std::abort();
    return GrammarVocabulary::FromTokenizer(**tokenizer);
  }();
  return vocab;
}

std::shared_ptr<const Grammar> RecordsGrammar() {
  static const std::shared_ptr<const Grammar> grammar = [] {
    auto text = ReadFileToString("bench/schemas/records.json");
    if (!text.ok()) std::abort();
    auto compiled = CompileJsonSchema(*text);
    if (!compiled.ok()) std::abort();
    return std::make_shared<const Grammar>(std::move(*compiled));
  }();
  return grammar;
}

// Output prefixes of the records schema; each benchmark argument is one.
const char* const kPrefixes[] = {
    "",                                                     // before the object
    R"({"people": [{"name": ")",                            // inside a string of at most 40 characters
    R"({"people": [{"name": "Ada", "age": 3)",              // inside a bounded integer
    R"({"people": [{"name": "Ada", "age": 36, "role": ")",  // inside an enum
    R"({"people": [{"name": "Ada", "age": 36, "role": "analyst", "active": true, "joined": "2021-0)",  // a
                                                                                                       // date
    R"({"people": [{"name": "Ada", "age": 36, "role": "analyst", "active": true, "joined": "2021-02-03", "email": "ada@)",  // an unbounded string
};

GrammarConstraint AtPrefix(const std::shared_ptr<const TokenGrammar>& grammar, int prefix) {
  GrammarConstraint c(grammar);
  if (!c.AcceptBytes(kPrefixes[prefix])) std::abort();
  return c;
}

// A fresh TokenGrammar per iteration: nothing cached.
void BM_MaskUncached(benchmark::State& state) {
  std::vector<uint32_t> mask;
  const std::shared_ptr<const GrammarVocabulary>& vocab = QwenVocabulary();  // loaded before the clock starts
  const std::shared_ptr<const Grammar> records = RecordsGrammar();
  for (auto _ : state) {
    auto grammar = std::make_shared<const TokenGrammar>(records, vocab);
    GrammarConstraint c = AtPrefix(grammar, static_cast<int>(state.range(0)));
    c.FillMask(&mask);
    benchmark::DoNotOptimize(mask.data());
  }
}
BENCHMARK(BM_MaskUncached)->DenseRange(0, 5)->ArgName("prefix")->Unit(benchmark::kMillisecond);

void BM_MaskCached(benchmark::State& state) {
  auto grammar = std::make_shared<const TokenGrammar>(RecordsGrammar(), QwenVocabulary());
  GrammarConstraint c = AtPrefix(grammar, static_cast<int>(state.range(0)));
  std::vector<uint32_t> mask;
  c.FillMask(&mask);
  for (auto _ : state) {
    c.FillMask(&mask);
    benchmark::DoNotOptimize(mask.data());
  }
}
BENCHMARK(BM_MaskCached)->DenseRange(0, 5)->ArgName("prefix")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
