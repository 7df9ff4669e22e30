// GPT-2's reversible mapping between bytes and printable Unicode characters,
// which byte-level BPE vocabularies use to spell arbitrary bytes as text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// The character that stands for byte `b` ('Ġ' for a space, 'Ċ' for '\n').
char32_t ByteToUnicode(uint8_t b);

// The UTF-8 spelling of ByteToUnicode(b).
const std::string& ByteToUnicodeUtf8(uint8_t b);

// The byte that `cp` stands for, or nullopt when `cp` is not in the mapping.
std::optional<uint8_t> UnicodeToByte(char32_t cp);

// Spells raw bytes in the mapped form ("hello world" -> "helloĠworld").
std::string BytesToUnicodeText(std::string_view bytes);

// The raw bytes a mapped piece stands for ("Ġhello" -> " hello"), or nullopt
// when the piece is not valid UTF-8 or holds a character outside the mapping.
std::optional<std::string> UnicodeTextToBytes(std::string_view piece);
// The same appended to `out`; false, leaving `out` as it was, where
// UnicodeTextToBytes gives nullopt.
bool AppendUnicodeTextAsBytes(std::string_view piece, std::string& out);

}  // namespace kiln
