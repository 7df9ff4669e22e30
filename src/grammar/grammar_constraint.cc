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

bool GrammarConstraint::Walk(const GrammarState& from, std::string_view bytes, GrammarState* to) const {
  GrammarState current = from, next;
  for (char c : bytes) {
    if (!grammar_->matcher().Step(current, static_cast<uint8_t>(c), &next)) return false;
    std::swap(current, next);
  }
  *to = std::move(current);
  return true;
}

void GrammarConstraint::Remember(Checkpoint checkpoint) {
  history_.push_back(std::move(checkpoint));
  if (history_.size() > kMaxRollbackTokens) history_.pop_front();
}

bool GrammarConstraint::IsAllowed(int32_t token) const {
  const GrammarVocabulary& vocab = grammar_->vocabulary();
  if (finished_ || token < 0 || token >= vocab.size()) return false;
  if (vocab.IsEnd(token)) return GrammarMatcher::CanEnd(state_);
  const std::string& bytes = vocab.bytes(token);
  GrammarState ignored;
  return !bytes.empty() && Walk(state_, bytes, &ignored);
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
    GrammarState next;
    if (bytes.empty() || !Walk(state_, bytes, &next)) return false;
    state_ = std::move(next);
  }
  Remember(std::move(checkpoint));
  return true;
}

bool GrammarConstraint::AcceptBytes(std::string_view bytes) {
  if (finished_) return false;
  GrammarState next;
  if (!Walk(state_, bytes, &next)) return false;
  Remember(Checkpoint{std::move(state_), finished_});
  state_ = std::move(next);
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
