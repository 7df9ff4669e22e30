// The byte-level BPE file pairs vocab.json + merges.txt and encoder.json +
// vocab.bpe, whose pre-tokenizer comes from the model family.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {

enum class BpeFamily {
  kGpt2,    // GPT-2's split pattern, no normalization
  kQwen2,   // Qwen2's split pattern (single digits), NFC
  kLlama3,  // Llama 3's split pattern (digit triples), whole-word vocabulary hits skip merging
};

std::string_view BpeFamilyName(BpeFamily family);

// The family a folder's configuration points to: the tokenizer class, then
// config.json's model_type, then the added tokens; GPT-2 when nothing says.
BpeFamily DetectBpeFamily(const TokenizerConfig& config);

// Sets the family's normalizer, pre-tokenizer, ignore_merges and whether BOS
// is added by default.
Status SetBpeFamilyPipeline(BpeFamily family, TokenizerSpec& spec);

// Reads a vocabulary (JSON object piece -> id) and a merge list (one "a b"
// per line; a first line starting with "#version" is a header, every other
// line is a merge, including ones starting with '#').
Expected<TokenizerSpec> ReadBpeVocabFiles(const std::string& vocab_path, const std::string& merges_path,
                                          BpeFamily family);

}  // namespace kiln
