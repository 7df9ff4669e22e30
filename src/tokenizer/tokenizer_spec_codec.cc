// Layout: magic "KTOK", format version, then the spec's fields in their
// declaration order, little-endian fixed widths; strings and arrays carry a
// uint32 length. Regexes are stored as their patterns and compiled again.
#include "tokenizer/tokenizer_spec_codec.h"

#include "core/byte_stream.h"

namespace kiln {
namespace {

constexpr uint32_t kSpecMagic = 0x4b4f544b;  // "KTOK"
constexpr uint32_t kSpecVersion = 1;
// Bounds on lengths, far above real tokenizers, so that a corrupt length is
// refused before it is allocated.
constexpr uint32_t kMaxPieceBytes = 1u << 16;
constexpr uint32_t kMaxTextBytes = 1u << 24;  // chat templates, patterns
constexpr uint32_t kMaxSteps = 256;
constexpr uint32_t kMaxIds = 1u << 16;

void PutBool(ByteWriter& w, bool b) { w.Put(static_cast<uint8_t>(b ? 1 : 0)); }

Expected<bool> GetBool(ByteReader& r) {
  KILN_ASSIGN_OR_RETURN(uint8_t b, r.Get<uint8_t>());
  if (b > 1) return Corrupt("{}: a flag of {} at offset {}", r.what(), b, r.position() - 1);
  return b == 1;
}

// An enum stored as a byte, refused past its last value.
template <typename E>
Expected<E> GetEnum(ByteReader& r, E last, const char* name) {
  KILN_ASSIGN_OR_RETURN(uint8_t v, r.Get<uint8_t>());
  if (v > static_cast<uint8_t>(last)) return Corrupt("{}: {} {} is not one kiln knows", r.what(), name, v);
  return static_cast<E>(v);
}

void PutRegex(ByteWriter& w, const std::shared_ptr<const Regex>& regex) {
  PutBool(w, regex->literal());
  w.PutString(regex->pattern());
}

Expected<Regex> GetRegex(ByteReader& r) {
  KILN_ASSIGN_OR_RETURN(bool literal, GetBool(r));
  std::string pattern;
  KILN_RETURN_IF_ERROR(r.GetString(&pattern, kMaxTextBytes));
  auto regex = Regex::Compile(pattern, literal);
  if (!regex.ok()) return Corrupt("{}: {}", r.what(), regex.status().message());
  return std::move(regex).value();
}

void PutNormalizer(ByteWriter& w, const Normalizer& n) {
  w.Put(static_cast<uint32_t>(n.steps().size()));
  for (const Normalizer::Step& s : n.steps()) {
    w.Put(static_cast<uint8_t>(s.kind));
    switch (s.kind) {
      case Normalizer::Kind::kUnicodeForm: w.Put(static_cast<uint8_t>(s.form)); break;
      case Normalizer::Kind::kPrepend: w.PutString(s.to); break;
      case Normalizer::Kind::kReplace:
        w.PutString(s.from);
        w.PutString(s.to);
        break;
      case Normalizer::Kind::kReplaceRegex:
        PutRegex(w, s.regex);
        w.PutString(s.to);
        break;
      case Normalizer::Kind::kLowercase:
      case Normalizer::Kind::kCollapseSpaces: break;
    }
  }
}

Status GetNormalizer(ByteReader& r, Normalizer* n) {
  KILN_ASSIGN_OR_RETURN(uint32_t steps, r.GetCount(kMaxSteps, 1, "normalizer steps"));
  for (uint32_t i = 0; i < steps; ++i) {
    KILN_ASSIGN_OR_RETURN(auto kind, GetEnum(r, Normalizer::Kind::kCollapseSpaces, "normalizer step"));
    std::string from, to;
    switch (kind) {
      case Normalizer::Kind::kUnicodeForm: {
        KILN_ASSIGN_OR_RETURN(auto form, GetEnum(r, Normalizer::Form::kNfkd, "normal form"));
        n->AddUnicodeForm(form);
        break;
      }
      case Normalizer::Kind::kPrepend:
        KILN_RETURN_IF_ERROR(r.GetString(&to, kMaxTextBytes));
        n->AddPrepend(std::move(to));
        break;
      case Normalizer::Kind::kReplace:
        KILN_RETURN_IF_ERROR(r.GetString(&from, kMaxTextBytes));
        KILN_RETURN_IF_ERROR(r.GetString(&to, kMaxTextBytes));
        if (from.empty()) return Corrupt("{}: a Replace step with nothing to replace", r.what());
        n->AddReplace(std::move(from), std::move(to));
        break;
      case Normalizer::Kind::kReplaceRegex: {
        KILN_ASSIGN_OR_RETURN(Regex regex, GetRegex(r));
        KILN_RETURN_IF_ERROR(r.GetString(&to, kMaxTextBytes));
        n->AddReplaceRegex(std::move(regex), std::move(to));
        break;
      }
      case Normalizer::Kind::kLowercase: n->AddLowercase(); break;
      case Normalizer::Kind::kCollapseSpaces: n->AddCollapseSpaces(); break;
    }
  }
  return Status::Ok();
}

void PutPreTokenizer(ByteWriter& w, const PreTokenizer& p) {
  w.Put(static_cast<uint32_t>(p.steps().size()));
  for (const PreTokenizer::Step& s : p.steps()) {
    w.Put(static_cast<uint8_t>(s.kind));
    switch (s.kind) {
      case PreTokenizer::Kind::kSplit:
        PutRegex(w, s.regex);
        w.Put(static_cast<uint8_t>(s.behavior));
        PutBool(w, s.invert);
        break;
      case PreTokenizer::Kind::kByteLevelPrefix: break;
      case PreTokenizer::Kind::kMetaspace:
        w.PutString(s.replacement);
        w.Put(static_cast<uint8_t>(s.scheme));
        PutBool(w, s.split);
        break;
    }
  }
}

Status GetPreTokenizer(ByteReader& r, PreTokenizer* p) {
  KILN_ASSIGN_OR_RETURN(uint32_t steps, r.GetCount(kMaxSteps, 1, "pre-tokenizer steps"));
  for (uint32_t i = 0; i < steps; ++i) {
    KILN_ASSIGN_OR_RETURN(auto kind, GetEnum(r, PreTokenizer::Kind::kMetaspace, "pre-tokenizer step"));
    switch (kind) {
      case PreTokenizer::Kind::kSplit: {
        KILN_ASSIGN_OR_RETURN(Regex regex, GetRegex(r));
        KILN_ASSIGN_OR_RETURN(auto behavior, GetEnum(r, SplitBehavior::kContiguous, "split behaviour"));
        KILN_ASSIGN_OR_RETURN(bool invert, GetBool(r));
        p->AddSplit(std::move(regex), behavior, invert);
        break;
      }
      case PreTokenizer::Kind::kByteLevelPrefix:
        KILN_RETURN_IF_ERROR(p->AddByteLevel(/*add_prefix_space=*/true, /*use_regex=*/false));
        break;
      case PreTokenizer::Kind::kMetaspace: {
        std::string replacement;
        KILN_RETURN_IF_ERROR(r.GetString(&replacement, kMaxTextBytes));
        KILN_ASSIGN_OR_RETURN(auto scheme, GetEnum(r, PrependScheme::kNever, "prepend scheme"));
        KILN_ASSIGN_OR_RETURN(bool split, GetBool(r));
        p->AddMetaspace(std::move(replacement), scheme, split);
        break;
      }
    }
  }
  return Status::Ok();
}

void PutIds(ByteWriter& w, const std::vector<int32_t>& ids) {
  w.Put(static_cast<uint32_t>(ids.size()));
  w.PutBytes(ids.data(), ids.size() * sizeof(int32_t));
}

Status GetIds(ByteReader& r, std::vector<int32_t>* ids) {
  KILN_ASSIGN_OR_RETURN(uint32_t n, r.GetCount(kMaxIds, sizeof(int32_t), "ids"));
  ids->resize(n);
  return r.GetBytes(ids->data(), n * sizeof(int32_t));
}

Status GetSpec(ByteReader& r, TokenizerSpec& spec) {
  KILN_ASSIGN_OR_RETURN(uint32_t magic, r.Get<uint32_t>());
  if (magic != kSpecMagic) return Corrupt("{}: not a compiled tokenizer", r.what());
  KILN_ASSIGN_OR_RETURN(uint32_t version, r.Get<uint32_t>());
  if (version != kSpecVersion) {
    return Corrupt("{}: compiled tokenizer format {}, this kiln reads {}", r.what(), version, kSpecVersion);
  }
  KILN_ASSIGN_OR_RETURN(spec.flavor, GetEnum(r, BpeFlavor::kScoredPieces, "BPE flavour"));

  const auto max_vocab = static_cast<uint32_t>(kMaxTokenizerVocab);
  KILN_ASSIGN_OR_RETURN(uint32_t n, r.GetCount(max_vocab, sizeof(uint32_t), "pieces"));
  spec.pieces.resize(n);
  for (std::string& piece : spec.pieces) {
    KILN_RETURN_IF_ERROR(r.GetString(&piece, kMaxPieceBytes));
  }
  KILN_ASSIGN_OR_RETURN(uint32_t kinds, r.GetCount(max_vocab, 1, "token kinds"));
  spec.kinds.resize(kinds);
  for (TokenKind& kind : spec.kinds) {
    KILN_ASSIGN_OR_RETURN(kind, GetEnum(r, TokenKind::kUnused, "token kind"));
  }
  KILN_ASSIGN_OR_RETURN(uint32_t scores, r.GetCount(max_vocab, sizeof(float), "scores"));
  spec.scores.resize(scores);
  KILN_RETURN_IF_ERROR(r.GetBytes(spec.scores.data(), scores * sizeof(float)));
  KILN_ASSIGN_OR_RETURN(uint32_t merges, r.GetCount(4 * max_vocab, 2 * sizeof(uint32_t), "merges"));
  spec.merges.resize(merges);
  for (auto& [left, right] : spec.merges) {
    KILN_RETURN_IF_ERROR(r.GetString(&left, kMaxPieceBytes));
    KILN_RETURN_IF_ERROR(r.GetString(&right, kMaxPieceBytes));
  }
  KILN_ASSIGN_OR_RETURN(spec.byte_fallback, GetBool(r));
  KILN_ASSIGN_OR_RETURN(spec.fuse_unk, GetBool(r));
  KILN_ASSIGN_OR_RETURN(spec.ignore_merges, GetBool(r));
  KILN_ASSIGN_OR_RETURN(spec.unk_id, r.Get<int32_t>());

  KILN_RETURN_IF_ERROR(GetNormalizer(r, &spec.normalizer));
  KILN_RETURN_IF_ERROR(GetPreTokenizer(r, &spec.pre_tokenizer));
  KILN_ASSIGN_OR_RETURN(spec.strip_leading_space, GetBool(r));

  KILN_ASSIGN_OR_RETURN(uint32_t added, r.GetCount(max_vocab, sizeof(int32_t) + sizeof(uint32_t) + 5, "added tokens"));
  spec.added_tokens.resize(added);
  for (AddedToken& t : spec.added_tokens) {
    KILN_ASSIGN_OR_RETURN(t.id, r.Get<int32_t>());
    KILN_RETURN_IF_ERROR(r.GetString(&t.content, kMaxPieceBytes));
    KILN_ASSIGN_OR_RETURN(t.special, GetBool(r));
    KILN_ASSIGN_OR_RETURN(t.normalized, GetBool(r));
    KILN_ASSIGN_OR_RETURN(t.lstrip, GetBool(r));
    KILN_ASSIGN_OR_RETURN(t.rstrip, GetBool(r));
    KILN_ASSIGN_OR_RETURN(t.single_word, GetBool(r));
  }
  KILN_ASSIGN_OR_RETURN(spec.normalize_added_token_patterns, GetBool(r));

  KILN_ASSIGN_OR_RETURN(spec.bos_id, r.Get<int32_t>());
  KILN_ASSIGN_OR_RETURN(spec.eos_id, r.Get<int32_t>());
  KILN_ASSIGN_OR_RETURN(spec.add_bos, GetBool(r));
  KILN_ASSIGN_OR_RETURN(spec.add_eos, GetBool(r));
  KILN_RETURN_IF_ERROR(GetIds(r, &spec.end_of_generation_ids));
  KILN_RETURN_IF_ERROR(r.GetString(&spec.chat_template, kMaxTextBytes));
  return r.End();
}

}  // namespace

std::vector<uint8_t> EncodeTokenizerSpec(const TokenizerSpec& spec) {
  ByteWriter w;
  w.Put(kSpecMagic);
  w.Put(kSpecVersion);
  w.Put(static_cast<uint8_t>(spec.flavor));
  w.Put(static_cast<uint32_t>(spec.pieces.size()));
  for (const std::string& piece : spec.pieces) w.PutString(piece);
  w.Put(static_cast<uint32_t>(spec.kinds.size()));
  for (TokenKind kind : spec.kinds) w.Put(static_cast<uint8_t>(kind));
  w.Put(static_cast<uint32_t>(spec.scores.size()));
  w.PutBytes(spec.scores.data(), spec.scores.size() * sizeof(float));
  w.Put(static_cast<uint32_t>(spec.merges.size()));
  for (const auto& [left, right] : spec.merges) {
    w.PutString(left);
    w.PutString(right);
  }
  PutBool(w, spec.byte_fallback);
  PutBool(w, spec.fuse_unk);
  PutBool(w, spec.ignore_merges);
  w.Put(spec.unk_id);

  PutNormalizer(w, spec.normalizer);
  PutPreTokenizer(w, spec.pre_tokenizer);
  PutBool(w, spec.strip_leading_space);

  w.Put(static_cast<uint32_t>(spec.added_tokens.size()));
  for (const AddedToken& t : spec.added_tokens) {
    w.Put(t.id);
    w.PutString(t.content);
    for (bool flag : {t.special, t.normalized, t.lstrip, t.rstrip, t.single_word}) PutBool(w, flag);
  }
  PutBool(w, spec.normalize_added_token_patterns);

  w.Put(spec.bos_id);
  w.Put(spec.eos_id);
  PutBool(w, spec.add_bos);
  PutBool(w, spec.add_eos);
  PutIds(w, spec.end_of_generation_ids);
  w.PutString(spec.chat_template);
  return w.Take();
}

Expected<TokenizerSpec> DecodeTokenizerSpec(std::span<const uint8_t> bytes, std::string source) {
  TokenizerSpec spec;
  const std::string what = source + ": compiled tokenizer";
  ByteReader r(bytes, what.c_str());
  KILN_RETURN_IF_ERROR(GetSpec(r, spec));
  spec.source = std::move(source);
  return spec;
}

}  // namespace kiln
