// A TokenizerSpec as bytes: what a compiled artifact stores so that loading
// its tokenizer reads plain arrays instead of parsing GGUF metadata or a
// tokenizer.json of a 150k-token vocabulary again.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {

std::vector<uint8_t> EncodeTokenizerSpec(const TokenizerSpec& spec);

// Reads what EncodeTokenizerSpec wrote; `source` becomes spec.source.
// The bytes are untrusted: every count, enum and length is checked, and a
// buffer from another version of the format is refused by name.
Expected<TokenizerSpec> DecodeTokenizerSpec(std::span<const uint8_t> bytes, std::string source);

}  // namespace kiln
