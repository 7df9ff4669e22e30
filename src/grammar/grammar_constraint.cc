// GrammarConstraint: a state, a finished flag and a bounded history.
#include "grammar/grammar_constraint.h"

namespace kiln {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const TokenGrammar> grammar)
    : grammar_(std::move(grammar)), state_(grammar_->matcher().state()) {}

void GrammarConstraint::FillMask(std::vector<uint32_t>* mask) const {
  if (finished_) {
    mask->assign(grammar_->MaskWords(), 0);
    return;
  }
  grammar_->FillMask(state_, mask);
}

bool GrammarConstraint::IsAllowed(int32_t token) const {
  const GrammarVocabulary& vocab = grammar_->vocabulary();
  if (finished_ || token < 0 || token >= vocab.size()) return false;
  if (vocab.IsEnd(token)) return GrammarMatcher::CanEnd(state_);
  const std::string& bytes = vocab.bytes(token);
  if (bytes.empty()) return false;
  GrammarState current = state_, next;
  for (char c : bytes) {
    if (!grammar_->matcher().Step(current, static_cast<uint8_t>(c), &next)) return false;
    std::swap(current, next);
  }
  return true;
}

bool GrammarConstraint::Accept(int32_t token) {
  const GrammarVocabulary& vocab = grammar_->vocabulary();
  if (finished_ || token < 0 || token >= vocab.size()) return false;
  Checkpoint checkpoint{state_, finished_};
  if (vocab.IsEnd(token)) {
    if (!GrammarMatcher::CanEnd(state_)) return false;
    finished_ = true;
  } else {
    const std::string& bytes = vocab.bytes(token);
    if (bytes.empty()) return false;
    GrammarState current = state_, next;
    for (char c : bytes) {
      if (!grammar_->matcher().Step(current, static_cast<uint8_t>(c), &next)) return false;
      std::swap(current, next);
    }
    state_ = std::move(current);
  }
  history_.push_back(std::move(checkpoint));
  if (history_.size() > kMaxRollbackTokens) history_.pop_front();
  return true;
}

bool GrammarConstraint::Rollback(size_t n_tokens) {
  if (n_tokens > history_.size()) return false;
  if (n_tokens == 0) return true;
  Checkpoint& target = history_[history_.size() - n_tokens];
  state_ = std::move(target.state);
  finished_ = target.finished;
  history_.resize(history_.size() - n_tokens);
  return true;
}

bool GrammarConstraint::IsDeadEnd() const {
  if (finished_) return true;
  if (CanEnd()) return false;
  std::vector<uint32_t> mask;
  grammar_->FillMask(state_, &mask);
  for (uint32_t word : mask) {
    if (word != 0) return false;
  }
  return true;
}

}  // namespace kiln
