// tokenizer.model -> TokenizerSpec, reading only the ModelProto fields kiln
// needs, with every length checked.
#include "tokenizer/sentencepiece_model.h"

#include <cstring>

namespace kiln {

// ModelProto fields used (sentencepiece_model.proto):
//   1 pieces (repeated): 1 piece, 2 score (float), 3 type (1 normal,
//     2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)
//   2 trainer_spec: 3 model_type (1 unigram [default], 2 bpe), 24
//     treat_whitespace_as_suffix, 35 byte_fallback, 40 unk_id, 41 bos_id,
//     42 eos_id
//   3 normalizer_spec: 1 name, 2 precompiled_charsmap, 3 add_dummy_prefix,
//     4 remove_extra_whitespaces, 5 escape_whitespaces (all three default true)

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A cursor over one protobuf message; every read is bounds-checked.
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view bytes) : data_(bytes) {}

  bool done() const { return pos_ >= data_.size(); }

  // Reads the next field's number and wire type.
  bool NextField(uint32_t* field, uint32_t* wire) {
    uint64_t key;
    if (!ReadVarint(&key)) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    return *field != 0;
  }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      auto byte = static_cast<uint8_t>(data_[pos_++]);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) return true;
    }
    return false;
  }

  bool ReadBytes(std::string_view* bytes) {
    uint64_t length;
    if (!ReadVarint(&length) || length > data_.size() - pos_) return false;
    *bytes = data_.substr(pos_, length);
    pos_ += length;
    return true;
  }

  bool ReadFloat(float* value) {
    if (data_.size() - pos_ < 4) return false;
    uint32_t bits = 0;
    for (int k = 0; k < 4; ++k)
      bits |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_ + k])) << (8 * k);
    std::memcpy(value, &bits, 4);
    pos_ += 4;
    return true;
  }

  bool Skip(uint32_t wire) {
    uint64_t ignored;
    std::string_view bytes;
    switch (wire) {
      case kVarint: return ReadVarint(&ignored);
      case kFixed64:
        if (data_.size() - pos_ < 8) return false;
        pos_ += 8;
        return true;
      case kLengthDelimited: return ReadBytes(&bytes);
      case kFixed32:
        if (data_.size() - pos_ < 4) return false;
        pos_ += 4;
        return true;
      default: return false;
    }
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

struct TrainerSettings {
  int model_type = 1;
  bool treat_whitespace_as_suffix = false;
  bool byte_fallback = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2;
};

struct NormalizerSettings {
  std::string name;
  bool has_charsmap = false;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Reads the fields of one nested message through `on_field`, which returns
// false for a malformed value; unknown fields are skipped.
template <typename OnField>
bool ReadMessage(std::string_view bytes, OnField on_field) {
  ProtoReader reader(bytes);
  while (!reader.done()) {
    uint32_t field, wire;
    if (!reader.NextField(&field, &wire)) return false;
    bool handled = false;
    if (!on_field(reader, field, wire, &handled)) return false;
    if (!handled && !reader.Skip(wire)) return false;
  }
  return true;
}

bool ReadPiece(std::string_view bytes, std::string* piece, float* score, int* type) {
  return ReadMessage(bytes, [&](ProtoReader& r, uint32_t field, uint32_t wire, bool* handled) {
    uint64_t v;
    std::string_view s;
    if (field == 1 && wire == kLengthDelimited) {
      *handled = true;
      if (!r.ReadBytes(&s)) return false;
      piece->assign(s);
    } else if (field == 2 && wire == kFixed32) {
      *handled = true;
      return r.ReadFloat(score);
    } else if (field == 3 && wire == kVarint) {
      *handled = true;
      if (!r.ReadVarint(&v)) return false;
      *type = static_cast<int>(v);
    }
    return true;
  });
}

bool ReadTrainer(std::string_view bytes, TrainerSettings* t) {
  return ReadMessage(bytes, [&](ProtoReader& r, uint32_t field, uint32_t wire, bool* handled) {
    if (wire != kVarint) return true;
    uint64_t v;
    *handled = true;
    if (!r.ReadVarint(&v)) return false;
    switch (field) {
      case 3: t->model_type = static_cast<int>(v); break;
      case 24: t->treat_whitespace_as_suffix = v != 0; break;
      case 35: t->byte_fallback = v != 0; break;
      case 40: t->unk_id = static_cast<int32_t>(v); break;  // int32: negative ids arrive sign-extended
      case 41: t->bos_id = static_cast<int32_t>(v); break;
      case 42: t->eos_id = static_cast<int32_t>(v); break;
      default: break;
    }
    return true;
  });
}

bool ReadNormalizer(std::string_view bytes, NormalizerSettings* n) {
  return ReadMessage(bytes, [&](ProtoReader& r, uint32_t field, uint32_t wire, bool* handled) {
    uint64_t v;
    std::string_view s;
    if (wire == kLengthDelimited && (field == 1 || field == 2)) {
      *handled = true;
      if (!r.ReadBytes(&s)) return false;
      if (field == 1) n->name.assign(s);
      if (field == 2) n->has_charsmap = !s.empty();
    } else if (wire == kVarint && field >= 3 && field <= 5) {
      *handled = true;
      if (!r.ReadVarint(&v)) return false;
      bool flag = v != 0;
      if (field == 3) n->add_dummy_prefix = flag;
      if (field == 4) n->remove_extra_whitespaces = flag;
      if (field == 5) n->escape_whitespaces = flag;
    }
    return true;
  });
}

TokenKind KindOfType(int type) {
  switch (type) {
    case 2: return TokenKind::kUnknown;
    case 3: return TokenKind::kControl;
    case 4: return TokenKind::kUserDefined;
    case 5: return TokenKind::kUnused;
    case 6: return TokenKind::kByte;
    default: return TokenKind::kNormal;
  }
}

}  // namespace

Expected<TokenizerSpec> ParseSentencePieceModel(std::string_view bytes, const std::string& name) {
  TokenizerSpec spec;
  spec.source = name;
  spec.flavor = BpeFlavor::kScoredPieces;
  TrainerSettings trainer;
  NormalizerSettings normalizer;

  ProtoReader reader(bytes);
  while (!reader.done()) {
    uint32_t field, wire;
    if (!reader.NextField(&field, &wire)) return Corrupt("{}: malformed protobuf", name);
    std::string_view message;
    if (wire == kLengthDelimited && (field == 1 || field == 2 || field == 3)) {
      if (!reader.ReadBytes(&message))
        return Corrupt("{}: field {} runs past the end of the file", name, field);
    } else {
      if (!reader.Skip(wire)) return Corrupt("{}: malformed protobuf field {}", name, field);
      continue;
    }
    if (field == 1) {
      if (static_cast<int64_t>(spec.pieces.size()) >= kMaxTokenizerVocab) {
        return OutOfRange("{}: more than {} pieces", name, kMaxTokenizerVocab);
      }
      std::string piece;
      float score = 0;
      int type = 1;
      if (!ReadPiece(message, &piece, &score, &type)) {
        return Corrupt("{}: piece {} is malformed", name, spec.pieces.size());
      }
      if (piece.empty()) return Corrupt("{}: piece {} is empty", name, spec.pieces.size());
      spec.pieces.push_back(std::move(piece));
      spec.scores.push_back(score);
      spec.kinds.push_back(KindOfType(type));
    } else if (field == 2) {
      if (!ReadTrainer(message, &trainer)) return Corrupt("{}: trainer_spec is malformed", name);
    } else if (!ReadNormalizer(message, &normalizer)) {
      return Corrupt("{}: normalizer_spec is malformed", name);
    }
  }

  if (trainer.model_type != 2) {
    return Unsupported("{}: SentencePiece model type {} is not supported (kiln reads BPE models, type 2)",
                       name, trainer.model_type);
  }
  if (trainer.treat_whitespace_as_suffix)
    return Unsupported("{}: treat_whitespace_as_suffix is not supported", name);
  if (normalizer.has_charsmap) {
    return Unsupported("{}: normalization \"{}\" (a precompiled character map) is not supported", name,
                       normalizer.name);
  }
  if (spec.pieces.empty()) return Corrupt("{}: no pieces", name);

  spec.byte_fallback = trainer.byte_fallback;
  auto vocab_size = static_cast<int32_t>(spec.pieces.size());
  auto id_of_kind = [&](int32_t id, TokenKind kind) {
    return id >= 0 && id < vocab_size && spec.kinds[id] == kind ? id : -1;
  };
  spec.unk_id = id_of_kind(trainer.unk_id, TokenKind::kUnknown);
  spec.bos_id = id_of_kind(trainer.bos_id, TokenKind::kControl);
  spec.eos_id = id_of_kind(trainer.eos_id, TokenKind::kControl);
  spec.add_bos = true;  // Llama's convention, which tokenizer_config.json may override

  // SentencePiece's order: fold spaces, add the dummy prefix, escape spaces.
  if (normalizer.remove_extra_whitespaces) spec.normalizer.AddCollapseSpaces();
  if (normalizer.add_dummy_prefix) spec.normalizer.AddPrepend(" ");
  if (normalizer.escape_whitespaces) spec.normalizer.AddReplace(" ", "\xE2\x96\x81");
  spec.strip_leading_space = normalizer.add_dummy_prefix;

  // Control and unknown pieces are special tokens written as text; user
  // defined pieces are matched whole, as written, in normalized text, as
  // SentencePiece does.
  spec.normalize_added_token_patterns = false;
  for (int32_t id = 0; id < vocab_size; ++id) {
    TokenKind kind = spec.kinds[id];
    if (kind != TokenKind::kControl && kind != TokenKind::kUnknown && kind != TokenKind::kUserDefined)
      continue;
    AddedToken token;
    token.id = id;
    token.content = spec.pieces[id];
    token.special = kind != TokenKind::kUserDefined;
    token.normalized = kind == TokenKind::kUserDefined;
    spec.added_tokens.push_back(std::move(token));
  }
  return spec;
}

}  // namespace kiln
