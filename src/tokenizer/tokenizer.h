// Text <-> token ids for the engine, server and C API: byte-level BPE and
// SentencePiece BPE, from Hugging Face folders, tokenizer files or GGUF.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_token_matcher.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocabulary.h"

namespace kiln {

class BpeModel;
class GgufFile;
struct TokenizerSpec;

class Tokenizer {
 public:
  enum class Type { kByteLevelBpe, kSentencePieceBpe };

  // Checks and compiles a loader's description (see tokenizer_spec.h).
  // Errors name spec.source and the offending field.
  static Expected<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // The ids of `text`. With `add_special`, BOS (and EOS) are added where the
  // tokenizer's configuration says so. With `parse_special`, special and
  // added tokens written in the text ("<|im_end|>") become their single ids
  // before BPE sees the rest; without it they are ordinary text. Any bytes
  // are accepted: malformed UTF-8 is encoded byte by byte (byte-level BPE,
  // or SentencePiece byte fallback) and decodes back to the same bytes.
  // Thread-safe.
  std::vector<int32_t> Encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;

  // The text of `ids`, always well-formed UTF-8: byte sequences that do not
  // form characters become U+FFFD. With `skip_special`, special tokens
  // (control and unknown) are left out. Ids outside the vocabulary are
  // ignored. SentencePiece's dummy-prefix space before the first piece is
  // dropped. Decode(Encode(x, false)) == x for well-formed x, up to the
  // tokenizer's normalization (Qwen's NFC; SentencePiece's
  // remove_extra_whitespaces, off for Llama).
  std::string Decode(std::span<const int32_t> ids, bool skip_special = true) const;

  // The vocabulary's spelling of `id` ("Ġthe", "▁the", "<0x0A>",
  // "<|im_end|>"), or "" when `id` is outside the vocabulary.
  const std::string& TokenPiece(int32_t id) const;

  // Number of ids (the highest id + 1, gaps included).
  int32_t vocab_size() const { return vocab_->size(); }
  // -1 when the tokenizer has no such token.
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  // Whether Encode(text, add_special=true) puts bos_id() first.
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  // The ids that end generation: eos_id() plus the special tokens that close
  // a turn or a document (<|im_end|>, <|eot_id|>, <|endoftext|>, </s>, ...)
  // and those named by generation_config.json or GGUF metadata. Sorted.
  const std::vector<int32_t>& end_of_generation_ids() const { return end_of_generation_ids_; }
  bool IsEndOfGeneration(int32_t id) const;

  // True for control and unknown tokens (those Decode may skip).
  bool IsSpecial(int32_t id) const;

  Type bpe_type() const { return type_; }
  // "byte-level BPE" or "SentencePiece BPE".
  std::string_view type() const;

  // The tokens matched in text before BPE (special or merely added), by id.
  const std::vector<AddedToken>& special_tokens() const { return added_tokens_; }

  // The chat template from tokenizer_config.json or GGUF metadata, verbatim;
  // empty when there is none.
  const std::string& chat_template() const { return chat_template_; }

  // Where this tokenizer was loaded from.
  const std::string& source() const { return source_; }

 private:
  friend class StreamingDecoder;
  struct EncodeCache;
  Tokenizer() = default;

  // Encodes text between special tokens: normalize, cut at normalized added
  // tokens, pre-tokenize, BPE.
  void EncodeSegment(std::string_view segment, bool at_text_start, bool parse_special,
                     std::vector<int32_t>& ids, EncodeCache& cache) const;
  void EncodeNormalized(std::string_view text, bool at_text_start, std::vector<int32_t>& ids,
                        EncodeCache& cache) const;
  // Appends the bytes of `id` to `bytes` unless it is skipped; `at_start`
  // tracks whether any text came out yet (for the dummy-prefix space).
  void AppendTokenBytes(int32_t id, bool skip_special, bool* at_start, std::string& bytes) const;
  // What Decode writes for `id` (a vocabulary id).
  std::string_view TokenBytes(int32_t id) const;

  std::string source_;
  Type type_ = Type::kByteLevelBpe;
  std::unique_ptr<Vocabulary> vocab_;
  std::unique_ptr<BpeModel> model_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  // What Decode writes for each id, back to back: id i's bytes end at
  // token_ends_[i] and start where id i - 1's end.
  std::string token_text_;
  std::vector<uint32_t> token_ends_;
  std::vector<bool> strippable_;          // by id: may lose the dummy-prefix space
  bool strip_leading_space_ = false;
  bool cache_pre_tokens_ = false;
  AddedTokenMatcher raw_matcher_;         // added tokens matched in raw text
  AddedTokenMatcher normalized_matcher_;  // those matched after normalization
  std::vector<AddedToken> added_tokens_;
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  std::vector<int32_t> end_of_generation_ids_;
  std::string chat_template_;
};

// Decodes ids one at a time, as a generator produces them, and hands out
// text only once it is complete: never a partial UTF-8 character (SentencePiece
// byte pieces and byte-level tokens both split characters across ids).
// Concatenating every Add() and the final Flush() gives exactly
// tokenizer.Decode(ids, skip_special).
class StreamingDecoder {
 public:
  // With `at_text_start` false the ids continue earlier text (a prompt), so
  // the first piece keeps its leading space. REQUIRES: `tokenizer` outlives
  // this object.
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = true, bool at_text_start = true);

  // Adds one id; returns the text it completes (often empty).
  std::string Add(int32_t id);

  // Returns what is left (an unfinished character becomes U+FFFD) and
  // starts over as at construction.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool at_text_start_;
  bool at_start_;
  std::string pending_;  // bytes not yet handed out
};

// Loads the tokenizer of a model. `path` is a Hugging Face folder (it uses,
// in order of preference, tokenizer.json, tokenizer.model, vocab.json +
// merges.txt, encoder.json + vocab.bpe, with tokenizer_config.json for added
// tokens, BOS/EOS and the chat template) or a .gguf file.
Expected<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// The tokenizer of a GGUF file's tokenizer.ggml.* metadata.
Expected<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& gguf);

// What LoadTokenizer and LoadTokenizerFromGguf build their tokenizer from,
// before Tokenizer::Create compiles it (a compiled artifact stores it).
Expected<TokenizerSpec> LoadTokenizerSpec(const std::string& path);
Expected<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& gguf);

// A tokenizer from the text of a Hugging Face tokenizer.json (untrusted
// input: every field is checked). `name` is used in messages.
Expected<std::unique_ptr<Tokenizer>> LoadTokenizerFromJson(std::string_view json_text,
                                                           const std::string& name = "tokenizer.json");

}  // namespace kiln
