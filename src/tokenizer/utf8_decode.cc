// UTF-8 reading per RFC 3629 (no overlongs, surrogates or values past U+10FFFF).
#include "tokenizer/utf8_decode.h"

#include <cstdint>
#include <string>

namespace kiln {
namespace {

// How many bytes of a well-formed sequence start at s[i]: the full length
// when complete; otherwise the length of the longest valid prefix (at least
// 1), with *complete false.
size_t ScanSequence(std::string_view s, size_t i, bool* complete) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  *complete = false;
  uint8_t c = b(i);
  if (c < 0x80) {
    *complete = true;
    return 1;
  }
  size_t len;
  uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return k;
    uint8_t x = b(i + k);
    if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xbf)) return k;
  }
  *complete = true;
  return len;
}

}  // namespace

size_t DecodeUtf8At(std::string_view s, size_t i, char32_t* cp) {
  bool complete;
  size_t len = ScanSequence(s, i, &complete);
  if (!complete) {
    *cp = kInvalidCodePoint;
    return 1;
  }
  uint8_t c = static_cast<uint8_t>(s[i]);
  if (len == 1) {
    *cp = c;
    return 1;
  }
  char32_t v = c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) v = (v << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3f);
  *cp = v;
  return len;
}

void AppendUtf8Lossy(std::string_view bytes, std::string& out) {
  size_t i = 0;
  size_t run_start = 0;  // start of the well-formed run not yet copied
  while (i < bytes.size()) {
    bool complete;
    size_t len = ScanSequence(bytes, i, &complete);
    if (complete) {
      i += len;
      continue;
    }
    out.append(bytes.substr(run_start, i - run_start));
    out += "\xEF\xBF\xBD";
    i += len;
    run_start = i;
  }
  out.append(bytes.substr(run_start));
}

}  // namespace kiln
