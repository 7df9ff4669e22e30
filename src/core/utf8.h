// UTF-8 validation and helpers shared by parsers and tokenizers.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values
// beyond U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Byte offset of the first malformed sequence, or npos when valid.
size_t FirstInvalidUtf8(std::string_view s);

// Length of the longest prefix of `s` that ends on a character boundary and
// contains no incomplete trailing sequence (for streaming decode).
size_t CompleteUtf8Prefix(std::string_view s);

// Appends the UTF-8 encoding of `cp` (REQUIRES: cp <= 0x10FFFF).
void AppendUtf8(std::string& out, char32_t cp);

}  // namespace kiln
