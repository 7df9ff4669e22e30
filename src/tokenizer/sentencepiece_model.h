// Reading a SentencePiece tokenizer.model (a serialized ModelProto) into a
// spec, straight from the protobuf wire format.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {

// Debian's libsentencepiece ships no protobuf headers for the model's
// normalizer and trainer settings, hence the direct reading.

// Only BPE models are accepted (Unigram ones are reported as Unsupported),
// with identity normalization (no precompiled character map).
Expected<TokenizerSpec> ParseSentencePieceModel(std::string_view bytes, const std::string& name);

}  // namespace kiln
