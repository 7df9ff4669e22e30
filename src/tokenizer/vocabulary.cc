// Vocabulary lookup.
#include "tokenizer/vocabulary.h"

namespace kiln {

Vocabulary::Vocabulary(std::vector<std::string> pieces, std::vector<TokenKind> kinds,
                       std::vector<float> scores)
    : pieces_(std::move(pieces)), kinds_(std::move(kinds)), scores_(std::move(scores)) {
  index_.reserve(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    if (!pieces_[id].empty()) index_.emplace(pieces_[id], static_cast<int32_t>(id));
  }
}

int32_t Vocabulary::Find(std::string_view piece) const {
  auto it = index_.find(piece);
  return it == index_.end() ? -1 : it->second;
}

}  // namespace kiln
