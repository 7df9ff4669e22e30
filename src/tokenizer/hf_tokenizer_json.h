// Reading a Hugging Face tokenizer.json (BPE models only) into a spec.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {

// Parses the text of a tokenizer.json. `name` is used in messages. The model
// must be BPE; normalizers, pre-tokenizers, decoders and post-processors
// outside the supported set are reported as Unsupported, never guessed.
Expected<TokenizerSpec> ParseHfTokenizerJson(std::string_view text, const std::string& name);

}  // namespace kiln
