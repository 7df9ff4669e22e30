// SentencePiece's BPE: characters merge into the highest-scoring vocabulary
// piece first (ties: leftmost); what stays unknown becomes byte pieces.
#pragma once

#include <array>
#include <memory>

#include "core/status.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/vocabulary.h"

namespace kiln {

class ScoredBpe : public BpeModel {
 public:
  // REQUIRES: `vocab` has scores and outlives the model.
  static Expected<std::unique_ptr<ScoredBpe>> Create(const Vocabulary& vocab, bool byte_fallback,
                                                     int32_t unk_id);

  // `piece` is normalized text (spaces already written as U+2581).
  void Encode(std::string_view piece, std::vector<int32_t>& out) const override;

 private:
  ScoredBpe(const Vocabulary& vocab, int32_t unk_id) : vocab_(vocab), unk_id_(unk_id) {}
  // The id of a piece BPE may produce (normal, user-defined or unused), or -1.
  int32_t FindMergeable(std::string_view text) const;

  const Vocabulary& vocab_;
  int32_t unk_id_;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_{};
};

}  // namespace kiln
