// Vocabulary lookup.
#include "tokenizer/vocabulary.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>

namespace kiln {

Vocabulary::Vocabulary(std::vector<std::string> pieces, std::vector<TokenKind> kinds,
                       std::vector<float> scores)
    : pieces_(std::move(pieces)), kinds_(std::move(kinds)), scores_(std::move(scores)) {
  // At most half full.
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, 2 * pieces_.size()));
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const std::string& piece = pieces_[id];
    if (piece.empty()) continue;
    const uint64_t hash = XXH3_64bits(piece.data(), piece.size());
    const auto tag = static_cast<uint32_t>(hash >> 32);
    for (uint64_t at = hash & mask_;; at = (at + 1) & mask_) {
      Slot& slot = slots_[at];
      if (slot.id < 0) {
        slot = {static_cast<int32_t>(id), tag};
        break;
      }
      if (slot.tag == tag && pieces_[static_cast<size_t>(slot.id)] == piece) break;  // the lowest id stays
    }
  }
}

int32_t Vocabulary::Find(std::string_view piece) const {
  if (piece.empty() || slots_.empty()) return -1;
  const uint64_t hash = XXH3_64bits(piece.data(), piece.size());
  const auto tag = static_cast<uint32_t>(hash >> 32);
  for (uint64_t at = hash & mask_;; at = (at + 1) & mask_) {
    const Slot& slot = slots_[at];
    if (slot.id < 0) return -1;
    if (slot.tag == tag && pieces_[static_cast<size_t>(slot.id)] == piece) return slot.id;
  }
}

}  // namespace kiln
