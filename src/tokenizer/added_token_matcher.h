// Finds added (special) tokens in text before BPE sees it: leftmost-longest
// matching over a byte trie, with Hugging Face's lstrip/rstrip/single_word.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // a control token: skipped by Decode(skip_special)
  bool normalized = false;   // matched in normalized text rather than raw text
  bool lstrip = false;       // swallows the whitespace to its left
  bool rstrip = false;       // swallows the whitespace to its right
  bool single_word = false;  // only matches when not inside a word
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // REQUIRES: every content is non-empty.
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  bool empty() const { return tokens_.empty(); }

  // Cuts `text` at the tokens found in it: calls on_text(piece) for the text
  // between tokens (never empty) and on_token(id) for each token, in order.
  void Split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(int32_t)>& on_token) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> edges;  // byte -> child node
    int32_t token = -1;                              // index into tokens_
  };
  int32_t Child(int32_t node, uint8_t byte) const;
  // The longest acceptable token starting at `pos`, as an index, or -1.
  int32_t LongestAt(std::string_view text, size_t pos, size_t* length) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace kiln
