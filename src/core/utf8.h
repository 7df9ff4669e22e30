// UTF-8 validation, decoding and encoding, shared by parsers, tokenizers and
// the template interpreter: the one place that reads UTF-8 byte by byte.
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

inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

// Reads the character starting at s[i] (REQUIRES: i < s.size()). Returns its
// byte length and sets *cp. A malformed or truncated sequence reads as one
// byte with *cp = kInvalidCodePoint, so that callers stepping through any
// bytes, well-formed or not, always make progress.
size_t DecodeUtf8At(std::string_view s, size_t i, char32_t* cp);

// Appends `bytes` to `out` as well-formed UTF-8: each maximal malformed
// subsequence becomes U+FFFD, as Python's and Rust's lossy decoders do.
void AppendUtf8Lossy(std::string_view bytes, std::string& out);

}  // namespace kiln
