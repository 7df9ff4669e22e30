// One sequence's progress under a TokenGrammar: its mask, the tokens it
// accepted, and rollback for speculative decoding.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/token_grammar.h"

namespace kiln {

// How many accepted tokens a GrammarConstraint can roll back.
inline constexpr size_t kMaxRollbackTokens = 256;

// One sequence's progress through a TokenGrammar.
class GrammarConstraint {
 public:
  // REQUIRES: `grammar` is not null.
  explicit GrammarConstraint(std::shared_ptr<const TokenGrammar> grammar);

  // The tokens allowed next (see TokenGrammar::FillMask). After an end
  // token was accepted, nothing is allowed.
  void FillMask(std::vector<uint32_t>* mask) const;
  bool IsAllowed(int32_t token) const;

  // Advances by `token`; false and no change when it is not allowed.
  bool Accept(int32_t token);
  // Advances by raw output bytes that no single token accounts for (the
  // text from a lazy constraint's trigger on); false and no change when the
  // grammar rejects them. Counts as one step for Rollback.
  bool AcceptBytes(std::string_view bytes);
  // Undoes the last `n_tokens` accepted tokens (speculative decoding); false
  // and no change when fewer are remembered (see kMaxRollbackTokens).
  bool Rollback(size_t n_tokens);

  // Whether the text so far is complete (an end token would be allowed).
  bool CanEnd() const { return !finished_ && GrammarMatcher::CanEnd(state_); }
  // Whether an end token was accepted.
  bool finished() const { return finished_; }
  // Whether no token at all can follow (not even an end token).
  bool IsDeadEnd() const;

 private:
  struct Checkpoint {
    GrammarState state;
    bool finished;
  };
  // The state after `bytes` from `from`; false when rejected.
  bool Walk(const GrammarState& from, std::string_view bytes, GrammarState* to) const;
  void Remember(Checkpoint checkpoint);

  std::shared_ptr<const TokenGrammar> grammar_;
  GrammarState state_;
  bool finished_ = false;
  std::deque<Checkpoint> history_;
};

}  // namespace kiln
