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
//
// A multi-byte character whose code points all fare alike (every stack's
// character set holds all of them or none) gets "pending" entries instead
// of the matcher's states with the bytes so far: they only count the
// continuation bytes left before the state the character leads to. Without
// them each prefix of each character would be a state of its own.
class StateTable {
 public:
  static constexpr int32_t kUnknown = -2;
  static constexpr int32_t kRejected = -1;
  static constexpr int32_t kFull = -3;  // no room for another entry
  // Beyond this many entries (1 KiB of transitions each) the walk falls
  // back to stepping every node.
  static constexpr size_t kMaxEntries = 4096;

  // The id of `state`, numbering it if new; kFull when there is no room.
  int32_t Intern(GrammarState state) {
    std::string key = state.Key();
    auto found = ids_.find(key);
    if (found != ids_.end()) return found->second;
    const int32_t id = Add();
    if (id < 0) return id;
    ids_.emplace(std::move(key), id);
    entries_[static_cast<size_t>(id)].state = std::move(state);
    return id;
  }
  // The entry for `remaining` continuation bytes (1 to 3) before `result`
  // (an id); kFull when there is no room.
  int32_t InternPending(int32_t result, int remaining) {
    const int64_t key = static_cast<int64_t>(result) * 4 + remaining;
    auto found = pending_ids_.find(key);
    if (found != pending_ids_.end()) return found->second;
    const int32_t id = Add();
    if (id < 0) return id;
    pending_ids_.emplace(key, id);
    Entry& e = entries_[static_cast<size_t>(id)];
    e.pending_result = result;
    e.remaining = remaining;
    return id;
  }

  struct Entry {
    GrammarState state;       // when remaining == 0
    int32_t pending_result = kRejected;
    int remaining = 0;        // continuation bytes left of a pending character
  };
  const Entry& entry(int32_t id) const { return entries_[static_cast<size_t>(id)]; }
  int32_t& next(int32_t id, uint8_t byte) { return next_[static_cast<size_t>(id) * 256 + byte]; }

 private:
  int32_t Add() {
    if (entries_.size() >= kMaxEntries) return kFull;
    entries_.emplace_back();
    next_.resize(next_.size() + 256, kUnknown);
    return static_cast<int32_t>(entries_.size() - 1);
  }

  std::vector<Entry> entries_;
  std::vector<int32_t> next_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<int64_t, int32_t> pending_ids_;
};

// For a lead byte whose every continuation (0x80-0xBF) completes a valid
// character: the code points it can start and how many continuation bytes
// follow. False for ASCII, continuation and invalid bytes, and for the lead
// bytes whose second byte is restricted (E0, ED, F0, F4).
bool FreeLeadByte(uint8_t b, char32_t* lo, char32_t* hi, int* continuation) {
  if (b >= 0xC2 && b <= 0xDF) {
    *lo = static_cast<char32_t>(b & 0x1F) << 6;
    *hi = *lo | 0x3F;
    *continuation = 1;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    *lo = static_cast<char32_t>(b & 0x0F) << 12;
    *hi = *lo | 0xFFF;
    *continuation = 2;
  } else if (b >= 0xF1 && b <= 0xF3) {
    *lo = static_cast<char32_t>(b & 0x07) << 18;
    *hi = *lo | 0x3FFFF;
    *continuation = 3;
  } else {
    return false;
  }
  return true;
}

// The entry `byte` leads to from entry `from` (kRejected, or kFull).
int32_t StepInTable(const GrammarMatcher& matcher, StateTable& table, int32_t from, uint8_t byte,
                    GrammarState& scratch) {
  const StateTable::Entry& e = table.entry(from);
  if (e.remaining > 0) {
    if (byte < 0x80 || byte > 0xBF) return StateTable::kRejected;
    return e.remaining == 1 ? e.pending_result : table.InternPending(e.pending_result, e.remaining - 1);
  }
  char32_t lo, hi;
  int continuation;
  if (e.state.pending_bytes.empty() && FreeLeadByte(byte, &lo, &hi, &continuation)) {
    const std::vector<GrammarElement>& elements = matcher.grammar().elements();
    const std::vector<CharSet>& sets = matcher.grammar().char_sets();
    bool alike = true, any = false;
    for (const auto& stack : e.state.stacks) {
      if (stack.empty()) continue;
      const CharSet& set = sets[elements[stack.back()].index];
      if (set.ContainsAll(lo, hi)) {
        any = true;
      } else if (set.Intersects(lo, hi)) {
        alike = false;
        break;
      }
    }
    if (alike) {
      if (!any) return StateTable::kRejected;
      // Every code point of the range leads where its first one does.
      if (!matcher.StepCodePoint(e.state, lo, &scratch)) return StateTable::kRejected;
      const int32_t result = table.Intern(std::move(scratch));
      return result == StateTable::kFull ? result : table.InternPending(result, continuation);
    }
  }
  if (!matcher.Step(e.state, byte, &scratch)) return StateTable::kRejected;
  return table.Intern(std::move(scratch));
}

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

  // ids_at[d] is the table entry after the first d bytes of the current path.
  StateTable table;
  std::vector<int32_t> ids_at(trie.max_depth() + 1);
  ids_at[0] = table.Intern(state);
  GrammarState scratch;
  bool table_full = false;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    const int32_t from = ids_at[node.depth - 1];
    int32_t next = table.next(from, node.byte);
    if (next == StateTable::kUnknown) {
      next = StepInTable(matcher_, table, from, node.byte, scratch);  // may grow the table: no references held
      if (next == StateTable::kFull) {
        table_full = true;
        break;
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
