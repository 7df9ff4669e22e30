// What a Hugging Face folder says about its tokenizer besides the vocabulary:
// added tokens, BOS/EOS, chat template, generation EOS ids.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_token_matcher.h"

namespace kiln {

struct TokenizerSpec;

// A token named by the configuration: absent, explicitly null, or a content.
struct NamedToken {
  bool stated = false;  // the configuration mentions it (maybe as null)
  std::string content;  // empty when stated as null
};

struct TokenizerConfig {
  std::vector<AddedToken> added_tokens;  // tokenizer_config.json, then added_tokens.json
  NamedToken bos_token, eos_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;
  std::string tokenizer_class;              // e.g. "Qwen2Tokenizer"
  std::string model_type;                   // config.json, e.g. "qwen2"
  std::vector<int32_t> generation_eos_ids;  // generation_config.json eos_token_id
};

// Reads the configuration files of `folder`; each one may be missing.
// Errors name the file and field.
Expected<TokenizerConfig> ReadTokenizerConfig(const std::string& folder);

// Folds the configuration into a spec built from vocabulary files: adds the
// added tokens it lacks, resolves BOS/EOS/UNK names (keeping the spec's ids
// where the configuration is silent), applies add_bos/add_eos, and copies
// the chat template and generation EOS ids.
Status ApplyTokenizerConfig(const TokenizerConfig& config, TokenizerSpec& spec);

// Where neither the files nor the configuration name a BOS or EOS token,
// picks the conventional one among the special tokens (<s> or
// <|begin_of_text|>; </s>, <|end_of_text|> or <|endoftext|>).
void ApplyDefaultSpecialIds(const TokenizerConfig& config, TokenizerSpec& spec);

}  // namespace kiln
