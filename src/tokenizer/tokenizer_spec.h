// Everything a loader learns about a tokenizer, in one plain struct that
// Tokenizer::Create checks and compiles.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/added_token_matcher.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocabulary.h"

namespace kiln {

// The most ids a tokenizer may have; bounds what untrusted files can make
// kiln allocate (real vocabularies have at most a few hundred thousand).
inline constexpr int64_t kMaxTokenizerVocab = int64_t{1} << 21;

enum class BpeFlavor {
  kByteLevel,     // GPT-2 byte-level BPE with ranked merges
  kRankedChars,   // Hugging Face BPE over characters (tokenizer.json of Llama 2)
  kScoredPieces,  // SentencePiece BPE by piece score (tokenizer.model, GGUF llama)
};

struct TokenizerSpec {
  std::string source;  // where it came from, for messages
  BpeFlavor flavor = BpeFlavor::kByteLevel;

  std::vector<std::string> pieces;                          // by id; "" for ids without a piece
  std::vector<TokenKind> kinds;                             // by id
  std::vector<float> scores;                                // kScoredPieces: by id
  std::vector<std::pair<std::string, std::string>> merges;  // ranked flavours: best first
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  int32_t unk_id = -1;

  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  // Decode drops the space that SentencePiece's dummy prefix put in front of
  // the first piece.
  bool strip_leading_space = false;

  // Tokens matched in the text before BPE. An id inside the vocabulary keeps
  // the vocabulary's piece (or fills an empty one); an id past its end grows
  // the vocabulary. Decode writes an added token as its content.
  std::vector<AddedToken> added_tokens;
  // How tokens marked `normalized` are looked for in normalized text:
  // spelled as the normalizer would write them (Hugging Face), or as
  // written (SentencePiece's user-defined pieces).
  bool normalize_added_token_patterns = true;

  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  // End-of-generation ids besides eos_id (from generation_config.json, GGUF
  // eot/eom ids); special tokens with well-known end names are added too.
  std::vector<int32_t> end_of_generation_ids;
  std::string chat_template;
};

}  // namespace kiln
