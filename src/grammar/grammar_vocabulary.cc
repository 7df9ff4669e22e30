// Recovers each token's bytes from the tokenizer's vocabulary spelling.
#include "grammar/grammar_vocabulary.h"

#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

// Longer pieces cannot be tokens of a real vocabulary; they are left out so
// the trie's depth stays bounded.
constexpr size_t kMaxTokenBytes = 1024;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string SentencePieceBytes(const std::string& piece) {
  // Byte fallback pieces "<0xAB>".
  if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
    int hi = HexDigit(piece[3]), lo = HexDigit(piece[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  std::string bytes;
  static const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581 '▁'
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      bytes.push_back(' ');
      i += kSpaceMark.size();
    } else {
      bytes.push_back(piece[i++]);
    }
  }
  return bytes;
}

}  // namespace

GrammarVocabulary::GrammarVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids)
    : token_bytes_(std::move(token_bytes)),
      end_ids_(std::move(end_ids)),
      is_end_(token_bytes_.size(), false) {
  for (int32_t id : end_ids_) {
    if (id >= 0 && id < size()) {
      is_end_[id] = true;
      token_bytes_[id].clear();  // an end token writes nothing the grammar sees
    }
  }
  for (std::string& b : token_bytes_) {
    if (b.size() > kMaxTokenBytes) b.clear();
  }
  trie_ = TokenTrie(token_bytes_);
}

std::shared_ptr<const GrammarVocabulary> GrammarVocabulary::FromTokenizer(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  bool byte_level = tokenizer.bpe_type() == Tokenizer::Type::kByteLevelBpe;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.IsSpecial(id)) continue;
    const std::string& piece = tokenizer.TokenPiece(id);
    if (byte_level) {
      // Added tokens are spelled as their text, not in the byte mapping.
      std::optional<std::string> mapped = UnicodeTextToBytes(piece);
      bytes[id] = mapped ? std::move(*mapped) : piece;
    } else {
      bytes[id] = SentencePieceBytes(piece);
    }
  }
  return std::make_shared<GrammarVocabulary>(std::move(bytes), tokenizer.end_of_generation_ids());
}

}  // namespace kiln
