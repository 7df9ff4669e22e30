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

namespace {

// The automaton states one mask walk meets, numbered, with their transitions
// by byte filled in as they are first taken. Inside a JSON string nearly
// every byte leads back to the same state, so almost every trie node is a
// table lookup instead of a Step over the parse stacks.
class StateTable {
 public:
  static constexpr int32_t kUnknown = -2;
  static constexpr int32_t kRejected = -1;
  // Beyond this many states (1 KiB of transitions each) the walk falls back
  // to stepping every node.
  static constexpr size_t kMaxStates = 4096;

  // The id of `state`, numbering it if new; -1 when the table is full.
  int32_t Intern(GrammarState state) {
    std::string key = state.Key();
    auto found = ids_.find(key);
    if (found != ids_.end()) return found->second;
    if (states_.size() >= kMaxStates) return -1;
    const auto id = static_cast<int32_t>(states_.size());
    ids_.emplace(std::move(key), id);
    states_.push_back(std::move(state));
    next_.resize(next_.size() + 256, kUnknown);
    return id;
  }
  const GrammarState& state(int32_t id) const { return states_[static_cast<size_t>(id)]; }
  int32_t& next(int32_t id, uint8_t byte) { return next_[static_cast<size_t>(id) * 256 + byte]; }

 private:
  std::vector<GrammarState> states_;
  std::vector<int32_t> next_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace

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

  // ids_at[d] is the automaton's state after the first d bytes of the
  // current path.
  StateTable table;
  std::vector<int32_t> ids_at(trie.max_depth() + 1);
  ids_at[0] = table.Intern(state);
  GrammarState stepped;
  bool table_full = false;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    const int32_t from = ids_at[node.depth - 1];
    int32_t next = table.next(from, node.byte);
    if (next == StateTable::kUnknown) {
      if (!matcher_.Step(table.state(from), node.byte, &stepped)) {
        next = StateTable::kRejected;
      } else {
        next = table.Intern(std::move(stepped));  // may grow the table: no references into it held here
        if (next < 0) {
          table_full = true;
          break;
        }
      }
      table.next(from, node.byte) = next;
    }
    if (next == StateTable::kRejected) {
      i = node.subtree_end;  // no token with this prefix can be allowed
      continue;
    }
    ids_at[node.depth] = next;
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) allow(ids[t]);
    ++i;
  }
  if (table_full) ComputeMaskStepByStep(state, mask);
}

void TokenGrammar::ComputeMaskStepByStep(const GrammarState& state, std::vector<uint32_t>* mask) const {
  const TokenTrie& trie = vocabulary_->trie();
  const std::vector<TokenTrie::Node>& nodes = trie.nodes();
  const std::vector<int32_t>& ids = trie.token_ids();
  auto allow = [&](int32_t id) { (*mask)[static_cast<size_t>(id) / 32] |= 1u << (id % 32); };
  std::vector<GrammarState> states(trie.max_depth() + 1);
  states[0] = state;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    if (!matcher_.Step(states[node.depth - 1], node.byte, &states[node.depth])) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) allow(ids[t]);
    ++i;
  }
}

}  // namespace kiln
