// The token table of a tokenizer: each id's piece as the vocabulary spells
// it, its kind and (for SentencePiece) its score, with lookup by piece.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The kinds of SentencePiece (and GGUF token_type) plus the gaps of a
// sparse id range.
enum class TokenKind : uint8_t {
  kNormal,       // an ordinary piece, produced by BPE
  kByte,         // SentencePiece byte fallback piece "<0xAB>"
  kControl,      // a special token such as <s> or <|im_end|>
  kUnknown,      // the unknown token
  kUserDefined,  // an added token that is not special
  kUnused,       // reserved, or an id no piece was given
};

class Vocabulary {
 public:
  Vocabulary() = default;
  // REQUIRES: kinds.size() == pieces.size(); scores empty or the same size.
  Vocabulary(std::vector<std::string> pieces, std::vector<TokenKind> kinds, std::vector<float> scores);

  Vocabulary(const Vocabulary&) = delete;
  Vocabulary& operator=(const Vocabulary&) = delete;

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  bool Contains(int32_t id) const { return id >= 0 && id < size(); }

  // REQUIRES: Contains(id).
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  TokenKind kind(int32_t id) const { return kinds_[id]; }
  // 0 when the vocabulary has no scores.
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[id]; }

  // The lowest id whose piece is `piece`, or -1. Empty pieces are never found.
  int32_t Find(std::string_view piece) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<TokenKind> kinds_;
  std::vector<float> scores_;
  // Lookup by piece: an open-addressing table of ids with a tag of each
  // piece's hash (a 150k-token vocabulary is built at every start and
  // probed three times per merge rule, so it is flat: one cache miss per
  // probe, where a node-based map took three).
  struct Slot {
    int32_t id = -1;  // -1: empty
    uint32_t tag = 0;
  };
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
};

}  // namespace kiln
