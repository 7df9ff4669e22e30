// The Tokenizer: compiles a TokenizerSpec, runs the encode pipeline (added
// tokens, normalizer, pre-tokenizer, BPE) and decodes.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/utf8.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/ranked_bpe.h"
#include "tokenizer/scored_bpe.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {
namespace {

constexpr int64_t kMaxVocabSize = kMaxTokenizerVocab;
constexpr size_t kMaxAddedTokenBytes = 4096;

// Pre-token results worth remembering within one Encode call.
constexpr size_t kMaxCachedPieceBytes = 64;
constexpr size_t kMaxCacheEntries = 1 << 16;

// Contents of special tokens that end a turn or a document.
constexpr std::string_view kEndOfGenerationNames[] = {
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|return|>",
    "<|EOT|>",
    "<｜end▁of▁sentence｜>",
};

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string ReplaceSpaceSymbols(const std::string& piece) {
  std::string out;
  out.reserve(piece.size());
  size_t pos = 0;
  while (true) {
    size_t hit = piece.find(kSpaceSymbol, pos);
    if (hit == std::string::npos) break;
    out.append(piece, pos, hit - pos);
    out += ' ';
    pos = hit + kSpaceSymbol.size();
  }
  out.append(piece, pos);
  return out;
}

// "<0xAB>" -> 0xAB.
std::optional<uint8_t> ParseBytePiece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return std::nullopt;
  int value = 0;
  for (int k = 3; k < 5; ++k) {
    char c = piece[k];
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<uint8_t>(value);
}

Status CheckId(const TokenizerSpec& spec, int32_t id, int32_t vocab_size, std::string_view field) {
  if (id < -1 || id >= vocab_size) {
    return Corrupt("{}: {} {} is outside the vocabulary of {} tokens", spec.source, field, id, vocab_size);
  }
  return Status::Ok();
}

// Gives every added token its id in the vocabulary, growing it for ids past
// its end, and marks the token's kind.
Status PlaceAddedTokens(TokenizerSpec& spec) {
  for (const AddedToken& token : spec.added_tokens) {
    if (token.id < 0 || token.id >= kMaxVocabSize) {
      return Corrupt("{}: added token \"{}\" has id {} (limit {})", spec.source, token.content, token.id,
                     kMaxVocabSize);
    }
    if (token.content.empty() || token.content.size() > kMaxAddedTokenBytes) {
      return Corrupt("{}: added token {} has {} bytes of content (1 to {} allowed)", spec.source, token.id,
                     token.content.size(), kMaxAddedTokenBytes);
    }
    auto size = static_cast<size_t>(token.id) + 1;
    if (size > spec.pieces.size()) {
      spec.pieces.resize(size);
      spec.kinds.resize(size, TokenKind::kUnused);
      if (!spec.scores.empty()) spec.scores.resize(size, 0.0f);
    }
    if (spec.pieces[token.id].empty()) spec.pieces[token.id] = token.content;
    TokenKind& kind = spec.kinds[token.id];
    if (kind == TokenKind::kNormal || kind == TokenKind::kUnused) {
      kind = token.special ? TokenKind::kControl : TokenKind::kUserDefined;
    }
  }
  return Status::Ok();
}

Expected<std::unique_ptr<BpeModel>> MakeModel(const TokenizerSpec& spec, const Vocabulary& vocab) {
  if (spec.flavor == BpeFlavor::kScoredPieces) {
    auto model = ScoredBpe::Create(vocab, spec.byte_fallback, spec.unk_id);
    if (!model.ok()) return model.status().WithContext(spec.source);
    return std::unique_ptr<BpeModel>(std::move(model).value());
  }
  RankedBpeOptions options;
  options.byte_level = spec.flavor == BpeFlavor::kByteLevel;
  options.byte_fallback = spec.byte_fallback;
  options.fuse_unk = spec.fuse_unk;
  options.ignore_merges = spec.ignore_merges;
  options.unk_id = spec.unk_id;
  auto model = RankedBpe::Create(vocab, spec.merges, options);
  if (!model.ok()) return model.status().WithContext(spec.source);
  return std::unique_ptr<BpeModel>(std::move(model).value());
}

// Appends what Decode writes for `id` to `out`; returns whether it is a
// SentencePiece piece that may lose the dummy-prefix space.
bool AppendDecodedForm(const TokenizerSpec& spec, const Vocabulary& vocab, int32_t id, const AddedToken* added,
                       std::string& out) {
  if (added != nullptr) {
    out += added->content;
    return false;
  }
  const std::string& piece = vocab.piece(id);
  TokenKind kind = vocab.kind(id);
  if (kind == TokenKind::kControl || kind == TokenKind::kUnknown) {
    out += piece;
    return false;
  }
  if (spec.flavor == BpeFlavor::kByteLevel) {
    // A piece outside GPT-2's alphabet is written as it is, as Hugging Face does.
    if (!AppendUnicodeTextAsBytes(piece, out)) out += piece;
    return false;
  }
  if (kind == TokenKind::kByte) {
    std::optional<uint8_t> byte = ParseBytePiece(piece);
    if (byte) {
      out += static_cast<char>(*byte);
    } else {
      out += piece;
    }
    return false;
  }
  out += ReplaceSpaceSymbols(piece);
  return true;
}

std::vector<int32_t> EndOfGenerationIds(const TokenizerSpec& spec, const Vocabulary& vocab) {
  std::vector<int32_t> ids;
  if (spec.eos_id >= 0) ids.push_back(spec.eos_id);
  // Ids past the vocabulary are kept: a model's embedding may be larger
  // than its tokenizer, and generating such an id should still stop.
  for (int32_t id : spec.end_of_generation_ids) {
    if (id >= 0) ids.push_back(id);
  }
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.kind(id) != TokenKind::kControl) continue;
    for (std::string_view name : kEndOfGenerationNames) {
      if (vocab.piece(id) == name) ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

struct Tokenizer::EncodeCache {
  std::unordered_map<std::string, std::vector<int32_t>> entries;
};

Tokenizer::~Tokenizer() = default;

Expected<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  const std::string& source = spec.source;
  if (spec.kinds.size() != spec.pieces.size()) {
    return Internal("{}: {} token kinds for {} pieces", source, spec.kinds.size(), spec.pieces.size());
  }
  if (spec.flavor == BpeFlavor::kScoredPieces && spec.scores.size() != spec.pieces.size()) {
    return Corrupt("{}: {} scores for {} pieces", source, spec.scores.size(), spec.pieces.size());
  }
  if (static_cast<int64_t>(spec.pieces.size()) > kMaxVocabSize) {
    return OutOfRange("{}: {} tokens exceed the limit of {}", source, spec.pieces.size(), kMaxVocabSize);
  }
  KILN_RETURN_IF_ERROR(PlaceAddedTokens(spec));
  const auto vocab_size = static_cast<int32_t>(spec.pieces.size());
  KILN_RETURN_IF_ERROR(CheckId(spec, spec.unk_id, vocab_size, "unknown token id"));
  KILN_RETURN_IF_ERROR(CheckId(spec, spec.bos_id, vocab_size, "BOS id"));
  KILN_RETURN_IF_ERROR(CheckId(spec, spec.eos_id, vocab_size, "EOS id"));

  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  tok->source_ = source;
  tok->type_ = spec.flavor == BpeFlavor::kByteLevel ? Type::kByteLevelBpe : Type::kSentencePieceBpe;
  tok->vocab_ =
      std::make_unique<Vocabulary>(std::move(spec.pieces), std::move(spec.kinds), std::move(spec.scores));
  const Vocabulary& vocab = *tok->vocab_;
  KILN_ASSIGN_OR_RETURN(tok->model_, MakeModel(spec, vocab));

  std::unordered_map<int32_t, const AddedToken*> added_by_id;
  for (const AddedToken& token : spec.added_tokens) added_by_id[token.id] = &token;
  // One buffer for every token's bytes: 150k strings of their own took
  // most of building a large vocabulary's tokenizer.
  size_t text_bytes = 0;
  for (int32_t id = 0; id < vocab_size; ++id) text_bytes += vocab.piece(id).size();
  tok->token_text_.reserve(text_bytes + text_bytes / 8);
  tok->token_ends_.resize(static_cast<size_t>(vocab_size));
  tok->strippable_.assign(vocab_size, false);
  for (int32_t id = 0; id < vocab_size; ++id) {
    auto added = added_by_id.find(id);
    tok->strippable_[id] = AppendDecodedForm(spec, vocab, id, added == added_by_id.end() ? nullptr : added->second,
                                             tok->token_text_);
    if (tok->token_text_.size() > std::numeric_limits<uint32_t>::max()) return OutOfRange("{}: the tokens' text exceeds 4 GiB", source);
    tok->token_ends_[static_cast<size_t>(id)] = static_cast<uint32_t>(tok->token_text_.size());
  }
  tok->strip_leading_space_ = spec.strip_leading_space;

  // Tokens marked "normalized" are looked for in normalized text, spelled
  // as the normalizer spells them (Hugging Face normalizes their content:
  // with Llama 2's Prepend("▁") "</s>" is found only as "▁</s>").
  std::vector<AddedToken> raw, normalized;
  for (const AddedToken& token : spec.added_tokens) {
    if (!token.normalized) {
      raw.push_back(token);
      continue;
    }
    AddedToken pattern = token;
    if (spec.normalize_added_token_patterns) pattern.content = spec.normalizer.Apply(token.content);
    if (!pattern.content.empty()) normalized.push_back(std::move(pattern));
  }
  tok->raw_matcher_ = AddedTokenMatcher(raw);
  tok->normalized_matcher_ = AddedTokenMatcher(normalized);
  tok->added_tokens_ = std::move(spec.added_tokens);
  std::sort(tok->added_tokens_.begin(), tok->added_tokens_.end(),
            [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });

  tok->normalizer_ = std::move(spec.normalizer);
  tok->pre_tokenizer_ = std::move(spec.pre_tokenizer);
  // Byte-level pre-tokens are short words that repeat; SentencePiece sees
  // whole segments, which do not.
  tok->cache_pre_tokens_ = !tok->pre_tokenizer_.empty();

  tok->unk_id_ = spec.unk_id;
  tok->bos_id_ = spec.bos_id;
  tok->eos_id_ = spec.eos_id;
  tok->add_bos_ = spec.add_bos && spec.bos_id >= 0;
  tok->add_eos_ = spec.add_eos && spec.eos_id >= 0;
  tok->end_of_generation_ids_ = EndOfGenerationIds(spec, vocab);
  tok->chat_template_ = std::move(spec.chat_template);
  return tok;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special && add_bos_) ids.push_back(bos_id_);
  EncodeCache cache;
  if (parse_special && !raw_matcher_.empty()) {
    raw_matcher_.Split(
        text,
        [&](std::string_view piece) {
          EncodeSegment(piece, piece.data() == text.data(), parse_special, ids, cache);
        },
        [&](int32_t id) { ids.push_back(id); });
  } else {
    EncodeSegment(text, true, parse_special, ids, cache);
  }
  if (add_special && add_eos_) ids.push_back(eos_id_);
  return ids;
}

void Tokenizer::EncodeSegment(std::string_view segment, bool at_text_start, bool parse_special,
                              std::vector<int32_t>& ids, EncodeCache& cache) const {
  std::string normalized = normalizer_.Apply(segment);
  if (!parse_special || normalized_matcher_.empty()) {
    EncodeNormalized(normalized, at_text_start, ids, cache);
    return;
  }
  std::string_view whole = normalized;
  normalized_matcher_.Split(
      whole,
      [&](std::string_view piece) {
        EncodeNormalized(piece, at_text_start && piece.data() == whole.data(), ids, cache);
      },
      [&](int32_t id) { ids.push_back(id); });
}

void Tokenizer::EncodeNormalized(std::string_view text, bool at_text_start, std::vector<int32_t>& ids,
                                 EncodeCache& cache) const {
  std::vector<std::string> pre_tokens;
  pre_tokenizer_.Apply(text, at_text_start, pre_tokens);
  for (const std::string& piece : pre_tokens) {
    if (!cache_pre_tokens_ || piece.size() > kMaxCachedPieceBytes) {
      model_->Encode(piece, ids);
      continue;
    }
    auto hit = cache.entries.find(piece);
    if (hit != cache.entries.end()) {
      ids.insert(ids.end(), hit->second.begin(), hit->second.end());
      continue;
    }
    size_t first = ids.size();
    model_->Encode(piece, ids);
    if (cache.entries.size() < kMaxCacheEntries) {
      cache.entries.emplace(
          piece, std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end()));
    }
  }
}

void Tokenizer::AppendTokenBytes(int32_t id, bool skip_special, bool* at_start, std::string& bytes) const {
  if (!vocab_->Contains(id)) return;
  if (skip_special && IsSpecial(id)) return;
  const std::string_view text = TokenBytes(id);
  if (text.empty()) return;
  if (*at_start) {
    *at_start = false;
    if (strip_leading_space_ && strippable_[id] && text[0] == ' ') {
      bytes.append(text.substr(1));
      return;
    }
  }
  bytes += text;
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  const size_t i = static_cast<size_t>(id);
  const uint32_t begin = i == 0 ? 0 : token_ends_[i - 1];
  return std::string_view(token_text_).substr(begin, token_ends_[i] - begin);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  bool at_start = true;
  for (int32_t id : ids) AppendTokenBytes(id, skip_special, &at_start, bytes);
  std::string text;
  text.reserve(bytes.size());
  AppendUtf8Lossy(bytes, text);
  return text;
}

const std::string& Tokenizer::TokenPiece(int32_t id) const {
  static const std::string kEmpty;
  return vocab_->Contains(id) ? vocab_->piece(id) : kEmpty;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return std::binary_search(end_of_generation_ids_.begin(), end_of_generation_ids_.end(), id);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  if (!vocab_->Contains(id)) return false;
  TokenKind kind = vocab_->kind(id);
  return kind == TokenKind::kControl || kind == TokenKind::kUnknown;
}

std::string_view Tokenizer::type() const {
  return type_ == Type::kByteLevelBpe ? "byte-level BPE" : "SentencePiece BPE";
}

}  // namespace kiln
