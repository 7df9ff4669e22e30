// Which replica last served a prompt prefix, known without a tokenizer: the
// prompt text is cut into fixed-size byte chunks and each chunk hashed
// together with the hash of everything before it, so that one hash stands
// for a whole prefix. A bounded least-recently-used map remembers, per
// prefix hash, the replica that was sent it (and so holds its KV blocks in
// its prefix cache, until it evicts them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::router {

// The chain hashes of `text`'s complete chunks of `chunk_bytes` bytes: the
// i-th stands for the first (i + 1) * chunk_bytes bytes. A text shorter
// than one chunk has none. REQUIRES: chunk_bytes > 0.
std::vector<uint64_t> PrefixChainHashes(std::string_view text, size_t chunk_bytes);

class PrefixAffinityMap {
 public:
  // Remembers at most `capacity` prefix hashes. REQUIRES: capacity > 0.
  explicit PrefixAffinityMap(size_t capacity);

  struct Match {
    int replica = -1;   // -1: no known prefix
    size_t chunks = 0;  // how many leading chunks that replica was sent
  };

  // The replica holding the longest known prefix of `hashes` among those
  // `usable` accepts. Does not count as a use.
  Match Longest(const std::vector<uint64_t>& hashes, const std::function<bool(int)>& usable) const;

  // Records that `replica` was sent every prefix in `hashes`, most
  // recently; the least recently used hashes beyond the capacity go.
  void Record(const std::vector<uint64_t>& hashes, int replica);

  // Forgets every prefix of `replica` (it restarted, or went away, and its
  // cache with it).
  void Forget(int replica);

  size_t size() const { return index_.size(); }

 private:
  using Entry = std::pair<uint64_t, int>;  // prefix hash, replica
  size_t capacity_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
};

}  // namespace kiln::router
