// Builds the preorder trie from the tokens sorted by their bytes.
#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace kiln {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (!token_bytes[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  // Sorted byte strings visit the trie in preorder: each string shares its
  // longest common prefix with the previous one.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return token_bytes[a] < token_bytes[b]; });
  std::vector<uint32_t> path;  // node index at each depth of the previous string
  std::string previous;
  for (int32_t id : order) {
    const std::string& bytes = token_bytes[id];
    size_t common = 0;
    while (common < previous.size() && common < bytes.size() && previous[common] == bytes[common]) ++common;
    if (common == bytes.size() && common == previous.size() && !path.empty()) {
      // The same bytes as the previous token: one more id on that node.
      token_ids_.push_back(id);
      nodes_[path.back()].tokens_end += 1;
      continue;
    }
    // Close the nodes below the common prefix.
    for (size_t d = common; d < path.size(); ++d)
      nodes_[path[d]].subtree_end = static_cast<uint32_t>(nodes_.size());
    path.resize(common);
    for (size_t d = common; d < bytes.size(); ++d) {
      auto index = static_cast<uint32_t>(nodes_.size());
      auto tokens_at = static_cast<uint32_t>(token_ids_.size());
      nodes_.push_back(
          {static_cast<uint8_t>(bytes[d]), static_cast<uint16_t>(d + 1), 0, tokens_at, tokens_at});
      path.push_back(index);
    }
    token_ids_.push_back(id);
    nodes_[path.back()].tokens_end += 1;
    max_depth_ = std::max(max_depth_, bytes.size());
    previous = bytes;
  }
  for (uint32_t index : path) nodes_[index].subtree_end = static_cast<uint32_t>(nodes_.size());
}

}  // namespace kiln
