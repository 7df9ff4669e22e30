// GPT-2's byte <-> character table: printable Latin-1 bytes stand for
// themselves, the other 68 move to U+0100 upwards in byte order.
#include "tokenizer/byte_unicode.h"

#include <array>

#include "core/utf8.h"

namespace kiln {
namespace {

bool StandsForItself(int b) {
  return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

struct ByteTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<std::string, 256> to_utf8;
  // Inverse for the code points in use (all are below 0x144).
  std::array<int16_t, 0x200> to_byte{};

  ByteTables() {
    to_byte.fill(-1);
    char32_t next_moved = 0x100;
    for (int b = 0; b < 256; ++b) {
      char32_t cp = StandsForItself(b) ? static_cast<char32_t>(b) : next_moved++;
      to_unicode[b] = cp;
      AppendUtf8(to_utf8[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

char32_t ByteToUnicode(uint8_t b) {
  return Tables().to_unicode[b];
}

const std::string& ByteToUnicodeUtf8(uint8_t b) {
  return Tables().to_utf8[b];
}

std::optional<uint8_t> UnicodeToByte(char32_t cp) {
  if (cp >= Tables().to_byte.size() || Tables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(Tables().to_byte[cp]);
}

std::string BytesToUnicodeText(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += Tables().to_utf8[static_cast<uint8_t>(c)];
  return out;
}

bool AppendUnicodeTextAsBytes(std::string_view piece, std::string& out) {
  const size_t before = out.size();
  size_t i = 0;
  while (i < piece.size()) {
    // Printable ASCII stands for itself (most of a vocabulary's bytes).
    const auto c = static_cast<unsigned char>(piece[i]);
    if (c >= 0x21 && c <= 0x7e) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    char32_t cp = 0;
    size_t len = DecodeUtf8At(piece, i, &cp);
    std::optional<uint8_t> b = UnicodeToByte(cp);  // nullopt for kInvalidCodePoint too
    if (!b) {
      out.resize(before);
      return false;
    }
    out += static_cast<char>(*b);
    i += len;
  }
  return true;
}

std::optional<std::string> UnicodeTextToBytes(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  if (!AppendUnicodeTextAsBytes(piece, out)) return std::nullopt;
  return out;
}

}  // namespace kiln
