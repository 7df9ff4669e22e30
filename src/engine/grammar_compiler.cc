// GrammarCompiler: GBNF or JSON Schema text to a cached TokenGrammar.
#include "engine/grammar_compiler.h"

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_vocabulary.h"
#include "grammar/json_grammar.h"
#include "grammar/json_schema_grammar.h"
#include "grammar/token_grammar.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

GrammarCompiler::GrammarCompiler(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
GrammarCompiler::~GrammarCompiler() = default;

std::shared_ptr<const GrammarVocabulary> GrammarCompiler::vocabulary() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!vocabulary_) vocabulary_ = GrammarVocabulary::FromTokenizer(tokenizer_);
  return vocabulary_;
}

Expected<std::shared_ptr<const TokenGrammar>> GrammarCompiler::Compile(const SamplingParams& params) {
  if (!params.constrained()) return std::shared_ptr<const TokenGrammar>();
  std::string key;
  if (params.json_object) {
    key = "o";
  } else if (!params.json_schema.empty()) {
    key = "s" + params.json_schema;
  } else {
    key = "g" + params.grammar;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      order_.splice(order_.begin(), order_, it->second.position);
      return it->second.grammar;
    }
  }

  // Compiled outside the lock: a large schema must not stall other requests.
  Expected<Grammar> grammar = InvalidArgument("no constraint");
  if (params.json_object) {
    grammar = ParseGbnf(JsonObjectGbnf());
  } else if (!params.json_schema.empty()) {
    grammar = CompileJsonSchema(params.json_schema);
    if (!grammar.ok()) return InvalidArgument("json_schema: {}", grammar.status().message());
  } else {
    grammar = ParseGbnf(params.grammar);
    if (!grammar.ok()) return InvalidArgument("grammar: {}", grammar.status().message());
  }
  KILN_RETURN_IF_ERROR(grammar.status());
  auto compiled = std::make_shared<const TokenGrammar>(std::make_shared<const Grammar>(std::move(*grammar)),
                                                       vocabulary());

  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second.grammar;  // another thread compiled it meanwhile
  order_.push_front(key);
  cache_.emplace(key, Entry{compiled, order_.begin()});
  while (cache_.size() > kMaxCachedGrammars) {
    cache_.erase(order_.back());
    order_.pop_back();
  }
  return std::shared_ptr<const TokenGrammar>(compiled);
}

}  // namespace kiln
