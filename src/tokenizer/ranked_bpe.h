// BPE driven by a ranked merge list (Hugging Face, GPT-2 files): byte-level,
// or over characters with byte fallback (Llama 2's tokenizer.json).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/vocabulary.h"

namespace kiln {

struct RankedBpeOptions {
  // Words are bytes spelled with GPT-2's byte-to-character mapping.
  bool byte_level = false;
  // A character missing from the vocabulary becomes its <0xAB> byte pieces.
  bool byte_fallback = false;
  // Consecutive unknown characters become one unknown token.
  bool fuse_unk = false;
  // A word that is itself in the vocabulary is one token, whatever the merges
  // say (Llama 3).
  bool ignore_merges = false;
  int32_t unk_id = -1;
};

class RankedBpe : public BpeModel {
 public:
  // `merges` are piece pairs, best (rank 0) first. Fails when a merge names
  // a piece, or makes a piece, that the vocabulary lacks.
  // REQUIRES: `vocab` outlives the model.
  static Expected<std::unique_ptr<RankedBpe>> Create(
      const Vocabulary& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      const RankedBpeOptions& options);

  void Encode(std::string_view piece, std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  RankedBpe(const Vocabulary& vocab, const RankedBpeOptions& options) : vocab_(vocab), options_(options) {}
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  // Appends the first symbols of `piece` (bytes, or characters with their
  // fallbacks) to `symbols`.
  void InitialSymbols(std::string_view piece, std::vector<BpeSymbol>& symbols) const;

  const Vocabulary& vocab_;
  RankedBpeOptions options_;
  std::unordered_map<uint64_t, Merge> merges_;
  // Byte-level: the token of each byte. Byte fallback: the <0xAB> pieces.
  std::array<int32_t, 256> byte_ids_{};
};

}  // namespace kiln
