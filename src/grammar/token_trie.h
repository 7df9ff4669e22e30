// A prefix tree over the byte strings of a vocabulary, stored in preorder so
// that a walk can skip a whole subtree by jumping to its end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte;           // the byte on the edge from the parent
    uint16_t depth;         // 1 for children of the (implicit) root
    uint32_t subtree_end;   // index of the first node after this subtree
    uint32_t tokens_begin;  // token_ids()[tokens_begin, tokens_end) end here
    uint32_t tokens_end;
  };

  TokenTrie() = default;
  // Tokens with empty bytes are left out (nothing to match).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  size_t max_depth_ = 0;
};

}  // namespace kiln
