// Trie matching of added tokens.
#include "tokenizer/added_token_matcher.h"

#include <algorithm>

namespace kiln {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Word characters for single_word: ASCII letters, digits, '_' and any
// non-ASCII byte (letters of other scripts are word characters too).
bool IsWordByte(char c) {
  auto b = static_cast<uint8_t>(c);
  return b >= 0x80 || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_';
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
  nodes_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& content = tokens_[t].content;
    if (content.empty()) continue;
    first_byte_[static_cast<uint8_t>(content[0])] = true;
    int32_t node = 0;
    for (char c : content) {
      auto byte = static_cast<uint8_t>(c);
      int32_t child = Child(node, byte);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].edges.emplace_back(byte, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    // The first token with a given content wins, as in a vocabulary.
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);
  }
}

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  for (const auto& [b, child] : nodes_[node].edges) {
    if (b == byte) return child;
  }
  return -1;
}

int32_t AddedTokenMatcher::LongestAt(std::string_view text, size_t pos, size_t* length) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    int32_t t = nodes_[node].token;
    if (t < 0) continue;
    size_t end = i + 1;
    if (tokens_[t].single_word &&
        ((pos > 0 && IsWordByte(text[pos - 1])) || (end < text.size() && IsWordByte(text[end])))) {
      continue;
    }
    best = t;
    *length = end - pos;
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, const std::function<void(std::string_view)>& on_text,
                              const std::function<void(int32_t)>& on_token) const {
  size_t text_start = 0;  // start of the text not yet reported
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t length = 0;
    int32_t t = LongestAt(text, pos, &length);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[t];
    size_t before_end = pos;  // end of the text before the token
    if (token.lstrip) {
      while (before_end > text_start && IsAsciiSpace(text[before_end - 1])) --before_end;
    }
    size_t after = pos + length;
    if (token.rstrip) {
      while (after < text.size() && IsAsciiSpace(text[after])) ++after;
    }
    if (before_end > text_start) on_text(text.substr(text_start, before_end - text_start));
    on_token(token.id);
    text_start = pos = after;
  }
  if (text_start < text.size()) on_text(text.substr(text_start));
}

}  // namespace kiln
