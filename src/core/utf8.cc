// UTF-8 per RFC 3629.
#include "core/utf8.h"

#include <cstdint>

namespace kiln {
namespace {

// The sequence starting at s[i] as far as it is well-formed.
struct Sequence {
  size_t length;   // the whole sequence when complete; otherwise its longest
                   // well-formed prefix (at least 1 byte)
  bool complete;   // a well-formed character
  bool truncated;  // not complete only because the input ends inside it
};

Sequence ScanSequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = b(i);
  if (c < 0x80) return {1, true, false};
  size_t len;
  uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;  // no overlongs
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;  // no overlongs
    if (c == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
  } else {
    return {1, false, false};
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {k, false, true};
    uint8_t x = b(i + k);
    if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xbf)) return {k, false, false};
  }
  return {len, true, false};
}

}  // namespace

size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    Sequence seq = ScanSequence(s, i);
    if (!seq.complete) return i;
    i += seq.length;
  }
  return std::string_view::npos;
}

bool IsValidUtf8(std::string_view s) { return FirstInvalidUtf8(s) == std::string_view::npos; }

size_t CompleteUtf8Prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    Sequence seq = ScanSequence(s, i);
    if (seq.complete) {
      i += seq.length;
    } else if (seq.truncated) {
      return i;
    } else {
      ++i;  // a malformed byte is passed through as is; it will never complete
    }
  }
  return i;
}

size_t DecodeUtf8At(std::string_view s, size_t i, char32_t* cp) {
  Sequence seq = ScanSequence(s, i);
  if (!seq.complete) {
    *cp = kInvalidCodePoint;
    return 1;
  }
  uint8_t c = static_cast<uint8_t>(s[i]);
  if (seq.length == 1) {
    *cp = c;
    return 1;
  }
  char32_t v = c & (0x7f >> seq.length);
  for (size_t k = 1; k < seq.length; ++k) v = (v << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3f);
  *cp = v;
  return seq.length;
}

void AppendUtf8Lossy(std::string_view bytes, std::string& out) {
  size_t i = 0;
  size_t run_start = 0;  // start of the well-formed run not yet copied
  while (i < bytes.size()) {
    Sequence seq = ScanSequence(bytes, i);
    if (seq.complete) {
      i += seq.length;
      continue;
    }
    out.append(bytes.substr(run_start, i - run_start));
    out += "\xEF\xBF\xBD";
    i += seq.length;
    run_start = i;
  }
  out.append(bytes.substr(run_start));
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace kiln
