// The merge loop shared by both BPE flavours: best candidate first, via a
// priority queue over a linked list, so a word of n symbols costs O(n log n).
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

namespace kiln {

// One symbol of a word being merged: a byte range of the word and its token.
struct BpeSymbol {
  int32_t id;      // token id, or -1 when the range is no token
  uint32_t begin;  // byte offset in the word
  uint32_t size;   // byte length; 0 once merged into its left neighbour
  int32_t prev;    // index of the previous live symbol, or -1
  int32_t next;    // index of the next live symbol, or -1
};

// What merging two adjacent symbols would give, and how urgently: the
// smallest priority merges first.
struct BpeCandidate {
  double priority;
  int32_t id;
};

// Makes symbols 0..n-1 a chain in order (prev/next links).
inline void LinkBpeSymbols(std::vector<BpeSymbol>& symbols) {
  for (size_t i = 0; i < symbols.size(); ++i) {
    symbols[i].prev = static_cast<int32_t>(i) - 1;
    symbols[i].next = i + 1 < symbols.size() ? static_cast<int32_t>(i) + 1 : -1;
  }
}

// Merges until no adjacent pair has a candidate. `lookup(left, right)`
// returns std::optional<BpeCandidate> for two adjacent live symbols.
// Afterwards the live symbols are reachable from symbols[0] through `next`.
// REQUIRES: the symbols are linked in order (LinkBpeSymbols).
template <typename Lookup>
void MergeBpeSymbols(std::vector<BpeSymbol>& symbols, const Lookup& lookup) {
  struct Entry {
    double priority;
    int32_t left;
    uint32_t size;  // of the merged range; stale when the pair has changed
    int32_t id;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.priority > b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };
  std::vector<Entry> storage;
  storage.reserve(symbols.size());
  std::priority_queue<Entry, std::vector<Entry>, Later> queue(Later{}, std::move(storage));

  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = symbols[left].next;
    if (right < 0) return;
    std::optional<BpeCandidate> candidate = lookup(symbols[left], symbols[right]);
    if (candidate)
      queue.push({candidate->priority, left, symbols[left].size + symbols[right].size, candidate->id});
  };

  for (size_t i = 0; i + 1 < symbols.size(); ++i) push_pair(static_cast<int32_t>(i));

  while (!queue.empty()) {
    Entry top = queue.top();
    queue.pop();
    BpeSymbol& left = symbols[top.left];
    // A symbol only grows, so an unchanged size means an unchanged pair.
    if (left.size == 0 || left.next < 0) continue;
    BpeSymbol& right = symbols[left.next];
    if (left.size + right.size != top.size) continue;

    left.id = top.id;
    left.size = top.size;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.size = 0;
    push_pair(left.prev);
    push_pair(top.left);
  }
}

}  // namespace kiln
