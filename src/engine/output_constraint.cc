// OutputConstraint: a GrammarConstraint, started at once or at a trigger.
#include "engine/output_constraint.h"

#include <algorithm>

#include "grammar/grammar_vocabulary.h"
#include "grammar/token_grammar.h"

namespace kiln {

OutputConstraint::OutputConstraint(std::shared_ptr<const TokenGrammar> grammar, std::vector<std::string> triggers)
    : grammar_(std::move(grammar)), triggers_(std::move(triggers)) {
  for (const std::string& t : triggers_) longest_trigger_ = std::max(longest_trigger_, t.size());
  if (triggers_.empty()) matcher_.emplace(grammar_);
}

void OutputConstraint::FillMask(std::vector<uint32_t>* mask) const { matcher_->FillMask(mask); }

bool OutputConstraint::Accept(int32_t token) {
  if (matcher_) {
    if (!matcher_->Accept(token)) return false;
    ++tokens_in_grammar_;
    return true;
  }
  if (triggers_.empty() || !abandoned_.empty()) return true;  // free for good
  const GrammarVocabulary& vocab = grammar_->vocabulary();
  if (token < 0 || token >= vocab.size()) return true;
  free_tail_ += vocab.bytes(token);
  // The earliest trigger that now appears; the text from its first byte on
  // is the grammar's.
  size_t found = std::string::npos;
  for (const std::string& t : triggers_) found = std::min(found, free_tail_.find(t));
  if (found == std::string::npos) {
    if (free_tail_.size() > longest_trigger_) free_tail_.erase(0, free_tail_.size() - longest_trigger_);
    return true;
  }
  matcher_.emplace(grammar_);
  if (!matcher_->AcceptBytes(std::string_view(free_tail_).substr(found))) {
    abandoned_ = "the grammar does not accept the text from its trigger on: \"" + free_tail_.substr(found) + "\"";
    matcher_.reset();
  }
  free_tail_.clear();
  return true;
}

size_t OutputConstraint::AllowedPrefix(std::span<const int32_t> tokens) {
  // Walking the tokens through the grammar and rolling them back again
  // (within kMaxRollbackTokens) is what a verified draft would do anyway.
  size_t allowed = 0;
  while (allowed < tokens.size() && allowed < kMaxRollbackTokens && matcher_->Accept(tokens[allowed]))
    ++allowed;
  matcher_->Rollback(allowed);
  return allowed;
}

bool OutputConstraint::Rollback(size_t n) {
  if (n == 0) return true;
  if (!matcher_ || n > tokens_in_grammar_ || !matcher_->Rollback(n)) return false;
  tokens_in_grammar_ -= n;
  return true;
}

}  // namespace kiln
