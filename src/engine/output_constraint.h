// One request's structured-output constraint as the engine applies it: the
// token mask of each step, the sampled token accepted into the grammar, and
// for a lazy constraint (SamplingParams::grammar_triggers) the watch for a
// trigger in the free text before the grammar starts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar_constraint.h"

namespace kiln {

class TokenGrammar;

class OutputConstraint {
 public:
  // REQUIRES: `grammar` is not null. With no triggers the grammar applies
  // from the first token.
  OutputConstraint(std::shared_ptr<const TokenGrammar> grammar, std::vector<std::string> triggers);

  // Whether the grammar applies to the next token (a lazy constraint is
  // inactive until its trigger appears, and after a rejected trigger).
  bool active() const { return matcher_.has_value(); }

  // The tokens allowed next: bit (id % 32) of word (id / 32); ids past the
  // grammar's vocabulary are never allowed. REQUIRES: active().
  void FillMask(std::vector<uint32_t>* mask) const;

  // Takes the token the sampler chose. Active: false when the grammar does
  // not allow it (the engine never samples such a token). Inactive: looks
  // for a trigger in the text so far and, when one completes, starts the
  // grammar at the trigger's first byte.
  bool Accept(int32_t token);

  // How many of `tokens`, in order from the current state, the grammar
  // accepts (a draft is cut there before verification); the state is left
  // as it was. REQUIRES: active().
  size_t AllowedPrefix(std::span<const int32_t> tokens);

  // Undoes the last `n` accepted tokens (speculative decoding); false when
  // they cannot be undone (more than remembered, or across the trigger).
  bool Rollback(size_t n);

  // Whether an end token was accepted, and whether no token at all can
  // follow (a grammar that can no longer go on).
  bool finished() const { return matcher_ && matcher_->finished(); }
  bool IsDeadEnd() const { return matcher_ && matcher_->IsDeadEnd(); }

  // Why the constraint stopped applying, when a trigger's text was not
  // accepted by the grammar (logged by the engine); empty otherwise.
  const std::string& abandoned() const { return abandoned_; }

 private:
  std::shared_ptr<const TokenGrammar> grammar_;
  std::vector<std::string> triggers_;
  size_t longest_trigger_ = 0;
  std::optional<GrammarConstraint> matcher_;
  // Lazy: the tail of the free text, long enough to hold any trigger.
  std::string free_tail_;
  // Tokens accepted since the grammar started (Rollback stops there).
  size_t tokens_in_grammar_ = 0;
  std::string abandoned_;
};

}  // namespace kiln
