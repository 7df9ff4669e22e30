// Character-at-a-time UTF-8 reading for the tokenizer, which must step
// through any bytes, well-formed or not.
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln {

// Reads the character starting at s[i] (REQUIRES: i < s.size()). Returns its
// byte length and sets *cp. A malformed or truncated sequence reads as one
// byte with *cp = kInvalidCodePoint, so that callers always make progress.
size_t DecodeUtf8At(std::string_view s, size_t i, char32_t* cp);

inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

// Appends `bytes` to `out` as well-formed UTF-8: each maximal malformed
// subsequence becomes U+FFFD, as Python's and Rust's lossy decoders do.
void AppendUtf8Lossy(std::string_view bytes, std::string& out);

}  // namespace kiln
