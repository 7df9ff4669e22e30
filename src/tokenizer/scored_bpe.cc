// SentencePiece BPE encoding. Unused pieces merge like normal ones, as in
// llama.cpp (SentencePiece re-splits them; only restricted vocabularies differ).
#include "tokenizer/scored_bpe.h"

#include <fmt/format.h>

#include "core/utf8.h"
#include "tokenizer/bpe_merge.h"

namespace kiln {

Expected<std::unique_ptr<ScoredBpe>> ScoredBpe::Create(const Vocabulary& vocab, bool byte_fallback,
                                                       int32_t unk_id) {
  std::unique_ptr<ScoredBpe> model(new ScoredBpe(vocab, unk_id));
  model->byte_ids_.fill(-1);
  if (byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      int32_t id = vocab.Find(fmt::format("<0x{:02X}>", b));
      if (id < 0) return Corrupt("byte fallback is on but piece <0x{:02X}> is missing", b);
      model->byte_ids_[b] = id;
    }
    model->byte_fallback_ = true;
  }
  return model;
}

int32_t ScoredBpe::FindMergeable(std::string_view text) const {
  int32_t id = vocab_.Find(text);
  if (id < 0) return -1;
  TokenKind kind = vocab_.kind(id);
  return kind == TokenKind::kNormal || kind == TokenKind::kUserDefined || kind == TokenKind::kUnused ? id
                                                                                                     : -1;
}

void ScoredBpe::Encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  std::vector<BpeSymbol> symbols;
  symbols.reserve(piece.size());
  size_t i = 0;
  while (i < piece.size()) {
    char32_t cp;
    size_t len = DecodeUtf8At(piece, i, &cp);
    symbols.push_back(
        {FindMergeable(piece.substr(i, len)), static_cast<uint32_t>(i), static_cast<uint32_t>(len), -1, -1});
    i += len;
  }
  LinkBpeSymbols(symbols);
  MergeBpeSymbols(symbols, [&](const BpeSymbol& left, const BpeSymbol& right) -> std::optional<BpeCandidate> {
    int32_t id = FindMergeable(piece.substr(left.begin, left.size + right.size));
    if (id < 0) return std::nullopt;
    return BpeCandidate{-static_cast<double>(vocab_.score(id)), id};
  });
  bool previous_unknown = false;
  for (int32_t s = 0; s >= 0; s = symbols[s].next) {
    const BpeSymbol& symbol = symbols[s];
    if (symbol.id >= 0) {
      out.push_back(symbol.id);
      previous_unknown = false;
    } else if (byte_fallback_) {
      for (uint32_t k = 0; k < symbol.size; ++k)
        out.push_back(byte_ids_[static_cast<uint8_t>(piece[symbol.begin + k])]);
    } else if (unk_id_ >= 0 && !previous_unknown) {
      // SentencePiece folds a run of unknown characters into one <unk>.
      out.push_back(unk_id_);
      previous_unknown = true;
    }
  }
}

}  // namespace kiln
