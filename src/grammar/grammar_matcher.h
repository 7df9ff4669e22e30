// A pushdown automaton that follows a Grammar one byte or code point at a
// time: the set of parse stacks the text so far leaves open.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace kiln {

// More open parses than this (an ambiguous grammar) and the text is treated
// as rejected rather than letting one request use unbounded memory.
inline constexpr size_t kMaxGrammarStacks = 4096;

// Where the automaton is: each stack holds grammar positions, the top one a
// character set still to match (an empty stack means the root rule is
// complete), plus the bytes of a UTF-8 character not yet complete. A value:
// copy it to snapshot, assign it back to roll back.
struct GrammarState {
  std::vector<std::vector<uint32_t>> stacks;  // sorted, unique
  std::string pending_bytes;

  bool dead() const { return stacks.empty(); }
  // A byte string identifying the state, for caches.
  std::string Key() const;
};

class GrammarMatcher {
 public:
  // REQUIRES: grammar is not null.
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Advances by one code point; false (and no change) when the grammar
  // cannot continue with it.
  bool AcceptCodePoint(char32_t cp);
  // Advances by bytes that may end inside a UTF-8 character (the rest is
  // kept pending); all or nothing: false and no change when rejected.
  bool AcceptBytes(std::string_view bytes);
  // Whether the text so far is a complete sentence of the grammar.
  bool CanEnd() const { return CanEnd(state_); }

  const GrammarState& state() const { return state_; }
  // REQUIRES: `state` came from a matcher of the same grammar.
  void Restore(GrammarState state) { state_ = std::move(state); }
  const Grammar& grammar() const { return *grammar_; }

  // The state-level steps, for callers (the token masker) that branch one
  // state into many. Return false when `from` cannot continue; *to is then
  // unspecified.
  bool Step(const GrammarState& from, uint8_t byte, GrammarState* to) const;
  bool StepCodePoint(const GrammarState& from, char32_t cp, GrammarState* to) const;
  static bool CanEnd(const GrammarState& state);

 private:
  // Writes the stacks `start` stands for into out[*count...] (reusing the
  // vectors there) after resolving rule references and finished
  // alternatives at its top, so that every one waits on characters or is
  // empty (complete). Stops once *count passes kMaxGrammarStacks.
  void Expand(const std::vector<uint32_t>& start, std::vector<std::vector<uint32_t>>& out,
              size_t* count) const;

  std::shared_ptr<const Grammar> grammar_;
  GrammarState state_;
};

}  // namespace kiln
