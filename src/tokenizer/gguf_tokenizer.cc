// The tokenizer of a GGUF file from tokenizer.ggml.*: "llama" is SentencePiece
// BPE, "gpt2" byte-level BPE with "pre" naming the split pattern.
#include "format/gguf.h"
#include "tokenizer/bpe_vocab_files.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {
namespace {

// GGUF token_type values (llama.cpp's llama_token_type).
TokenKind KindOfGgufType(int64_t type) {
  switch (type) {
    case 2: return TokenKind::kUnknown;
    case 3: return TokenKind::kControl;
    case 4: return TokenKind::kUserDefined;
    case 5: return TokenKind::kUnused;
    case 6: return TokenKind::kByte;
    default: return TokenKind::kNormal;
  }
}

Expected<const std::vector<GgufValue>*> ArrayOf(const GgufFile& gguf, std::string_view key, bool required) {
  const GgufValue* value = gguf.Find(key);
  if (value == nullptr) {
    if (required) return NotFound("{}: no {}", gguf.path(), key);
    return static_cast<const std::vector<GgufValue>*>(nullptr);
  }
  if (!value->is_array()) return Corrupt("{}: {} should be an array", gguf.path(), key);
  return &value->items();
}

Expected<BpeFamily> FamilyOfPre(const GgufFile& gguf, const std::string& pre) {
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2") return BpeFamily::kGpt2;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return BpeFamily::kQwen2;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return BpeFamily::kLlama3;
  return Unsupported(
      "{}: tokenizer.ggml.pre \"{}\" is not a pre-tokenizer kiln knows (gpt-2, qwen2, llama-bpe)",
      gguf.path(), pre);
}

// Reads tokenizer.ggml.<key> as an id; -1 when absent.
Expected<int32_t> IdOf(const GgufFile& gguf, std::string_view key) {
  const GgufValue* value = gguf.Find(key);
  if (value == nullptr) return -1;
  std::optional<int64_t> id = value->AsInt();
  if (!id || *id < 0 || *id >= kMaxTokenizerVocab)
    return Corrupt("{}: {} is not a token id", gguf.path(), key);
  return static_cast<int32_t>(*id);
}

}  // namespace

Expected<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& gguf) {
  const std::string& path = gguf.path();
  std::optional<std::string> model = gguf.GetString("tokenizer.ggml.model");
  if (!model) return NotFound("{}: no tokenizer.ggml.model", path);
  bool sentencepiece = *model == "llama";
  if (!sentencepiece && *model != "gpt2") {
    return Unsupported("{}: tokenizer.ggml.model \"{}\" is not supported (llama or gpt2)", path, *model);
  }

  TokenizerSpec spec;
  spec.source = path;
  spec.flavor = sentencepiece ? BpeFlavor::kScoredPieces : BpeFlavor::kByteLevel;

  KILN_ASSIGN_OR_RETURN(const std::vector<GgufValue>* tokens, ArrayOf(gguf, "tokenizer.ggml.tokens", true));
  if (static_cast<int64_t>(tokens->size()) > kMaxTokenizerVocab) {
    return OutOfRange("{}: {} tokens exceed the limit of {}", path, tokens->size(), kMaxTokenizerVocab);
  }
  spec.pieces.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::string* piece = (*tokens)[i].AsString();
    if (piece == nullptr) return Corrupt("{}: tokenizer.ggml.tokens[{}] is not a string", path, i);
    spec.pieces.push_back(*piece);
  }
  const size_t n = spec.pieces.size();

  KILN_ASSIGN_OR_RETURN(const std::vector<GgufValue>* types,
                        ArrayOf(gguf, "tokenizer.ggml.token_type", false));
  spec.kinds.assign(n, TokenKind::kNormal);
  if (types != nullptr) {
    if (types->size() != n) return Corrupt("{}: {} token types for {} tokens", path, types->size(), n);
    for (size_t i = 0; i < n; ++i) {
      std::optional<int64_t> type = (*types)[i].AsInt();
      if (!type) return Corrupt("{}: tokenizer.ggml.token_type[{}] is not an integer", path, i);
      spec.kinds[i] = KindOfGgufType(*type);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (spec.pieces[i].empty()) spec.kinds[i] = TokenKind::kUnused;
  }

  bool add_space_prefix = gguf.GetBool("tokenizer.ggml.add_space_prefix").value_or(true);
  bool remove_extra_whitespaces = gguf.GetBool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
  if (sentencepiece) {
    KILN_ASSIGN_OR_RETURN(const std::vector<GgufValue>* scores,
                          ArrayOf(gguf, "tokenizer.ggml.scores", false));
    spec.scores.assign(n, 0.0f);
    if (scores != nullptr) {
      if (scores->size() != n) return Corrupt("{}: {} scores for {} tokens", path, scores->size(), n);
      for (size_t i = 0; i < n; ++i) {
        std::optional<double> score = (*scores)[i].AsFloat();
        if (!score) return Corrupt("{}: tokenizer.ggml.scores[{}] is not a number", path, i);
        spec.scores[i] = static_cast<float>(*score);
      }
    }
    for (TokenKind kind : spec.kinds) spec.byte_fallback |= kind == TokenKind::kByte;
    if (remove_extra_whitespaces) spec.normalizer.AddCollapseSpaces();
    if (add_space_prefix) spec.normalizer.AddPrepend(" ");
    spec.normalizer.AddReplace(" ", "\xE2\x96\x81");
    spec.strip_leading_space = add_space_prefix;
    spec.add_bos = true;
  } else {
    KILN_ASSIGN_OR_RETURN(const std::vector<GgufValue>* merges, ArrayOf(gguf, "tokenizer.ggml.merges", true));
    spec.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const std::string* merge = (*merges)[i].AsString();
      size_t space = merge ? merge->find(' ') : std::string::npos;
      if (space == std::string::npos || space == 0 || space + 1 == merge->size()) {
        return Corrupt("{}: tokenizer.ggml.merges[{}] should be two pieces separated by a space", path, i);
      }
      spec.merges.emplace_back(merge->substr(0, space), merge->substr(space + 1));
    }
    KILN_ASSIGN_OR_RETURN(BpeFamily family,
                          FamilyOfPre(gguf, gguf.GetString("tokenizer.ggml.pre").value_or(std::string())));
    KILN_RETURN_IF_ERROR(SetBpeFamilyPipeline(family, spec));
  }

  // llama.cpp matches control, unknown and user-defined tokens in raw text.
  for (size_t i = 0; i < n; ++i) {
    TokenKind kind = spec.kinds[i];
    if (kind != TokenKind::kControl && kind != TokenKind::kUnknown && kind != TokenKind::kUserDefined)
      continue;
    AddedToken token;
    token.id = static_cast<int32_t>(i);
    token.content = spec.pieces[i];
    token.special = kind != TokenKind::kUserDefined;
    spec.added_tokens.push_back(std::move(token));
  }

  KILN_ASSIGN_OR_RETURN(spec.bos_id, IdOf(gguf, "tokenizer.ggml.bos_token_id"));
  KILN_ASSIGN_OR_RETURN(spec.eos_id, IdOf(gguf, "tokenizer.ggml.eos_token_id"));
  KILN_ASSIGN_OR_RETURN(spec.unk_id, IdOf(gguf, "tokenizer.ggml.unknown_token_id"));
  if (!sentencepiece) spec.unk_id = -1;  // byte-level BPE covers every byte
  for (std::string_view key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    KILN_ASSIGN_OR_RETURN(int32_t id, IdOf(gguf, key));
    if (id >= 0) spec.end_of_generation_ids.push_back(id);
  }
  if (std::optional<bool> add = gguf.GetBool("tokenizer.ggml.add_bos_token")) spec.add_bos = *add;
  if (std::optional<bool> add = gguf.GetBool("tokenizer.ggml.add_eos_token")) spec.add_eos = *add;
  spec.chat_template = gguf.GetString("tokenizer.chat_template").value_or(std::string());
  return spec;
}

Expected<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& gguf) {
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, TokenizerSpecFromGguf(gguf));
  return Tokenizer::Create(std::move(spec));
}

}  // namespace kiln
