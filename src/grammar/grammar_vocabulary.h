// The vocabulary as a grammar sees it: the bytes each token id writes, the
// ids that end generation, and the trie over those bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/token_trie.h"

namespace kiln {

class Tokenizer;

class GrammarVocabulary {
 public:
  // `token_bytes[id]` is what token id writes; empty for tokens a grammar
  // never allows (special tokens). `end_ids` are allowed exactly when the
  // grammar can end.
  GrammarVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids);

  // From a tokenizer: byte-level pieces mapped back to their bytes,
  // SentencePiece's "▁" as a space and "<0xAB>" byte pieces as that byte;
  // control, unknown and unused tokens write nothing; the tokenizer's
  // end-of-generation ids end. (SentencePiece's dropped leading space of the
  // first piece is not modelled: the grammar sees the space.)
  static std::shared_ptr<const GrammarVocabulary> FromTokenizer(const Tokenizer& tokenizer);

  int32_t size() const { return static_cast<int32_t>(token_bytes_.size()); }
  const std::string& bytes(int32_t id) const { return token_bytes_[id]; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }
  bool IsEnd(int32_t id) const { return is_end_[id]; }
  const TokenTrie& trie() const { return trie_; }

 private:
  std::vector<std::string> token_bytes_;
  std::vector<int32_t> end_ids_;
  std::vector<bool> is_end_;
  TokenTrie trie_;
};

}  // namespace kiln
