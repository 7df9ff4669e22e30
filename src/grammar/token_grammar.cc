// Per-state token masks: one walk of the token trie, cached by state.
#include "grammar/token_grammar.h"

namespace kiln {

TokenGrammar::TokenGrammar(std::shared_ptr<const Grammar> grammar,
                           std::shared_ptr<const GrammarVocabulary> vocabulary)
    : vocabulary_(std::move(vocabulary)), matcher_(std::move(grammar)) {}

void TokenGrammar::FillMask(const GrammarState& state, std::vector<uint32_t>* mask) const {
  std::string key = state.Key();
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto found = cache_.find(key);
    if (found != cache_.end()) {
      *mask = found->second;
      return;
    }
  }
  ComputeMask(state, mask);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCachedMasks) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  if (cache_.emplace(key, *mask).second) cache_order_.push_back(std::move(key));
}

void TokenGrammar::ComputeMask(const GrammarState& state, std::vector<uint32_t>* mask) const {
  mask->assign(MaskWords(), 0);
  auto allow = [&](int32_t id) { (*mask)[static_cast<size_t>(id) / 32] |= 1u << (id % 32); };
  if (GrammarMatcher::CanEnd(state)) {
    for (int32_t id : vocabulary_->end_ids()) {
      if (id >= 0 && id < vocabulary_->size()) allow(id);
    }
  }
  if (state.dead()) return;
  const TokenTrie& trie = vocabulary_->trie();
  const std::vector<TokenTrie::Node>& nodes = trie.nodes();
  const std::vector<int32_t>& ids = trie.token_ids();
  // states[d] is the automaton after the first d bytes of the current path.
  std::vector<GrammarState> states(trie.max_depth() + 1);
  states[0] = state;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    if (!matcher_.Step(states[node.depth - 1], node.byte, &states[node.depth])) {
      i = node.subtree_end;  // no token with this prefix can be allowed
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) allow(ids[t]);
    ++i;
  }
}

}  // namespace kiln
