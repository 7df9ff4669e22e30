// Grammar-constrained decoding over a tokenizer's vocabulary: which token ids
// may come next, as a bitmask, and advancing by the id that was sampled.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocabulary.h"

namespace kiln {

// Masks remembered per TokenGrammar (each a bit per token: 19 KB for a
// 150k vocabulary, so at most about 20 MB); the oldest goes first.
inline constexpr size_t kMaxCachedMasks = 1024;

// A grammar bound to a vocabulary, shared by every sequence decoding under
// it: masks computed for one automaton state are reused by all. Thread-safe.
class TokenGrammar {
 public:
  TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocabulary> vocabulary);

  // Bit (id % 32) of word (id / 32) is set when token id may follow `state`:
  // a token whose bytes the automaton accepts, or an end id when the grammar
  // can end. `mask` is resized to MaskWords().
  void FillMask(const GrammarState& state, std::vector<uint32_t>* mask) const;
  size_t MaskWords() const { return (static_cast<size_t>(vocabulary_->size()) + 31) / 32; }

  // The plain walk, stepping the automaton at every trie node: the
  // reference FillMask is tested against, and its fallback when a walk meets
  // too many distinct states to number them. ORs into `mask` (sized).
  void ComputeMaskStepByStep(const GrammarState& state, std::vector<uint32_t>* mask) const;

  const GrammarMatcher& matcher() const { return matcher_; }
  const GrammarVocabulary& vocabulary() const { return *vocabulary_; }

 private:
  // Walks the token trie from `state`, skipping every subtree whose prefix
  // the automaton rejects.
  void ComputeMask(const GrammarState& state, std::vector<uint32_t>* mask) const;

  std::shared_ptr<const GrammarVocabulary> vocabulary_;
  GrammarMatcher matcher_;  // holds the grammar; its own state is unused

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  mutable std::deque<std::string> cache_order_;  // oldest first, for eviction
};

}  // namespace kiln
