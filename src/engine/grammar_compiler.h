// Turns a request's structured-output constraint (SamplingParams' grammar,
// json_schema or json_object) into a TokenGrammar over the engine's
// vocabulary, remembering compiled grammars by their text.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/status.h"
#include "engine/sampling_params.h"

namespace kiln {

class GrammarVocabulary;
class TokenGrammar;
class Tokenizer;

// Compiled grammars kept per engine; the least recently used goes first.
// Each holds its own mask cache (token_grammar.h), so this bounds memory.
inline constexpr size_t kMaxCachedGrammars = 32;

class GrammarCompiler {
 public:
  // REQUIRES: `tokenizer` outlives the compiler.
  explicit GrammarCompiler(const Tokenizer& tokenizer);
  ~GrammarCompiler();

  // Null when `params` asks for no constraint. An invalid grammar or schema
  // is InvalidArgument whose message starts with the field ("grammar: ",
  // "json_schema: "). Thread-safe.
  Expected<std::shared_ptr<const TokenGrammar>> Compile(const SamplingParams& params);

  // The vocabulary as grammars see it (built on first use: a trie over
  // every token). Thread-safe.
  std::shared_ptr<const GrammarVocabulary> vocabulary();

 private:
  const Tokenizer& tokenizer_;
  std::mutex mu_;
  std::shared_ptr<const GrammarVocabulary> vocabulary_;
  // Key: the kind's letter then the text; most recently used first.
  std::list<std::string> order_;
  struct Entry {
    std::shared_ptr<const TokenGrammar> grammar;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, Entry> cache_;
};

}  // namespace kiln
