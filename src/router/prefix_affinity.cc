// Chunk-chain hashing and the LRU map of prefixes to replicas.
#include "router/prefix_affinity.h"

#include <xxhash.h>

namespace kiln::router {

std::vector<uint64_t> PrefixChainHashes(std::string_view text, size_t chunk_bytes) {
  std::vector<uint64_t> hashes;
  if (chunk_bytes == 0) return hashes;
  hashes.reserve(text.size() / chunk_bytes);
  uint64_t previous = 0;
  for (size_t start = 0; start + chunk_bytes <= text.size(); start += chunk_bytes) {
    // Seeding with the previous hash makes each one depend on the whole prefix.
    previous = XXH3_64bits_withSeed(text.data() + start, chunk_bytes, previous);
    hashes.push_back(previous);
  }
  return hashes;
}

PrefixAffinityMap::PrefixAffinityMap(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

PrefixAffinityMap::Match PrefixAffinityMap::Longest(const std::vector<uint64_t>& hashes,
                                                    const std::function<bool(int)>& usable) const {
  for (size_t i = hashes.size(); i > 0; --i) {
    auto it = index_.find(hashes[i - 1]);
    if (it != index_.end() && usable(it->second->second)) return Match{it->second->second, i};
  }
  return Match{};
}

void PrefixAffinityMap::Record(const std::vector<uint64_t>& hashes, int replica) {
  for (uint64_t hash : hashes) {
    auto it = index_.find(hash);
    if (it != index_.end()) {
      it->second->second = replica;
      lru_.splice(lru_.begin(), lru_, it->second);
      continue;
    }
    lru_.emplace_front(hash, replica);
    index_.emplace(hash, lru_.begin());
    if (index_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
}

void PrefixAffinityMap::Forget(int replica) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->second == replica) {
      index_.erase(it->first);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace kiln::router
