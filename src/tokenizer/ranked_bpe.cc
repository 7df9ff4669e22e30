// Ranked-merge BPE with Hugging Face's semantics: lowest rank first, ties
// leftmost; unknown characters fall back before any merge.
#include "tokenizer/ranked_bpe.h"

#include <fmt/format.h>

#include "core/utf8.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/byte_unicode.h"

namespace kiln {

Expected<std::unique_ptr<RankedBpe>> RankedBpe::Create(
    const Vocabulary& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    const RankedBpeOptions& options) {
  std::unique_ptr<RankedBpe> model(new RankedBpe(vocab, options));
  model->byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (options.byte_level) {
      model->byte_ids_[b] = vocab.Find(ByteToUnicodeUtf8(static_cast<uint8_t>(b)));
    } else if (options.byte_fallback) {
      model->byte_ids_[b] = vocab.Find(fmt::format("<0x{:02X}>", b));
    }
  }
  model->merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    int32_t left_id = vocab.Find(left);
    int32_t right_id = vocab.Find(right);
    joined.assign(left).append(right);
    int32_t id = vocab.Find(joined);
    if (left_id < 0 || right_id < 0 || id < 0) {
      const std::string& missing = left_id < 0 ? left : right_id < 0 ? right : joined;
      return Corrupt("merge {} (\"{} {}\"): piece \"{}\" is not in the vocabulary", rank, left, right,
                     missing);
    }
    // A repeated pair keeps its first (best) rank.
    model->merges_.emplace(PairKey(left_id, right_id), Merge{static_cast<int32_t>(rank), id});
  }
  return model;
}

void RankedBpe::InitialSymbols(std::string_view piece, std::vector<BpeSymbol>& symbols) const {
  auto add = [&](int32_t id, size_t begin, size_t size) {
    symbols.push_back({id, static_cast<uint32_t>(begin), static_cast<uint32_t>(size), -1, -1});
  };
  if (options_.byte_level) {
    for (size_t i = 0; i < piece.size(); ++i) add(byte_ids_[static_cast<uint8_t>(piece[i])], i, 1);
    return;
  }
  size_t i = 0;
  while (i < piece.size()) {
    char32_t cp;
    size_t len = DecodeUtf8At(piece, i, &cp);
    int32_t id = vocab_.Find(piece.substr(i, len));
    if (id >= 0) {
      add(id, i, len);
    } else {
      bool all_bytes = options_.byte_fallback;
      for (size_t k = 0; k < len && all_bytes; ++k)
        all_bytes = byte_ids_[static_cast<uint8_t>(piece[i + k])] >= 0;
      if (all_bytes) {
        for (size_t k = 0; k < len; ++k) add(byte_ids_[static_cast<uint8_t>(piece[i + k])], i + k, 1);
      } else if (options_.fuse_unk && !symbols.empty() && symbols.back().id == options_.unk_id &&
                 options_.unk_id >= 0) {
        symbols.back().size += static_cast<uint32_t>(len);
      } else {
        add(options_.unk_id, i, len);
      }
    }
    i += len;
  }
}

void RankedBpe::Encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    int32_t whole = options_.byte_level ? vocab_.Find(BytesToUnicodeText(piece)) : vocab_.Find(piece);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<BpeSymbol> symbols;
  symbols.reserve(piece.size());
  InitialSymbols(piece, symbols);
  LinkBpeSymbols(symbols);
  MergeBpeSymbols(symbols,
                  [this](const BpeSymbol& left, const BpeSymbol& right) -> std::optional<BpeCandidate> {
                    if (left.id < 0 || right.id < 0) return std::nullopt;
                    auto it = merges_.find(PairKey(left.id, right.id));
                    if (it == merges_.end()) return std::nullopt;
                    return BpeCandidate{static_cast<double>(it->second.rank), it->second.id};
                  });
  // A token with no id (a byte or character the vocabulary lacks, and no
  // unknown token) is dropped, as Hugging Face does.
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) out.push_back(symbols[i].id);
  }
}

}  // namespace kiln
