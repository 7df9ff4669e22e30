// Python `str` semantics over UTF-8 text (see py_string.h).
#include "jinja/py_string.h"

#include <utf8proc.h>

#include <algorithm>

#include "core/utf8.h"

namespace kiln::jinja {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Python's line boundaries (str.splitlines); "\r\n" is handled by the caller.
bool IsLineBoundary(char32_t c) {
  switch (c) {
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029: return true;
    default: return false;
  }
}

utf8proc_category_t Category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool IsCased(char32_t c) {
  auto cat = Category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

bool IsLetter(char32_t c) {
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return true;
    default: return false;
  }
}

bool IsNumeric(char32_t c) {
  auto cat = Category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

// The characters whose full (SpecialCasing) mappings differ from the simple
// ones in ways that show up in everyday text.
const char* FullUpper(char32_t c) {
  switch (c) {
    case 0x00DF: return "SS";
    case 0x0149: return "\u02BCN";
    case 0x01F0: return "J\u030C";
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05:
    case 0xFB06: return "ST";
    default: return nullptr;
  }
}

const char* FullTitle(char32_t c) {
  switch (c) {
    case 0x00DF: return "Ss";
    case 0xFB00: return "Ff";
    case 0xFB01: return "Fi";
    case 0xFB02: return "Fl";
    case 0xFB03: return "Ffi";
    case 0xFB04: return "Ffl";
    case 0xFB05:
    case 0xFB06: return "St";
    default: return nullptr;
  }
}

void AppendUpper(char32_t c, std::string* out) {
  if (c < 0x80) {
    *out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  } else if (const char* full = FullUpper(c)) {
    *out += full;
  } else {
    AppendUtf8(*out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
  }
}

void AppendLower(char32_t c, std::string* out) {
  if (c < 0x80) {
    *out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  } else if (c == 0x0130) {
    *out += "i\u0307";
  } else {
    AppendUtf8(*out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
}

void AppendTitle(char32_t c, std::string* out) {
  if (c < 0x80) {
    AppendUpper(c, out);
  } else if (const char* full = FullTitle(c)) {
    *out += full;
  } else {
    AppendUtf8(*out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
  }
}

// Calls f(code point, byte offset, size) for each code point of s.
template <typename F>
void ForEachCodePoint(std::string_view s, F&& f) {
  size_t pos = 0;
  while (pos < s.size()) {
    CodePoint cp = DecodeCodePoint(s, pos);
    f(cp.value, pos, cp.size);
    pos += cp.size;
  }
}

bool ContainsCodePoint(std::string_view set, char32_t c) {
  bool found = false;
  ForEachCodePoint(set, [&](char32_t x, size_t, size_t) { found = found || x == c; });
  return found;
}

void AppendHexEscape(char prefix, uint32_t value, int digits, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  *out += '\\';
  *out += prefix;
  for (int i = digits - 1; i >= 0; --i) *out += kHex[(value >> (4 * i)) & 0xF];
}

}  // namespace

CodePoint DecodeCodePoint(std::string_view s, size_t pos) {
  char32_t value;
  size_t len = DecodeUtf8At(s, pos, &value);
  return {value == kInvalidCodePoint ? kReplacement : value, len};
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  ForEachCodePoint(s, [&](char32_t, size_t, size_t) { ++n; });
  return n;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  ForEachCodePoint(s, [&](char32_t, size_t pos, size_t) { offsets.push_back(pos); });
  offsets.push_back(s.size());
  return offsets;
}

bool IsPySpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsPyPrintable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: return false;
    default: return true;
  }
}

bool PySpaceAt(std::string_view s, size_t pos, size_t* size) {
  CodePoint cp = DecodeCodePoint(s, pos);
  *size = cp.size;
  return IsPySpace(cp.value);
}

std::string_view PyStrip(std::string_view s, std::optional<std::string_view> chars, bool left, bool right) {
  auto strippable = [&](char32_t c) { return chars ? ContainsCodePoint(*chars, c) : IsPySpace(c); };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      CodePoint cp = DecodeCodePoint(s, begin);
      if (!strippable(cp.value)) break;
      begin += cp.size;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
      CodePoint cp = DecodeCodePoint(s, start);
      if (start + cp.size != end) {
        // A malformed tail: treat its last byte as one replacement character.
        start = end - 1;
        cp = {kReplacement, 1};
      }
      if (!strippable(cp.value)) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

std::vector<std::string> PySplit(std::string_view s, std::optional<std::string_view> sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    size_t start = 0;
    while (maxsplit-- > 0) {
      size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t pos = 0, size = 0;
  while (true) {
    while (pos < s.size() && PySpaceAt(s, pos, &size)) pos += size;
    if (pos >= s.size()) break;
    if (maxsplit-- <= 0) {
      // The remainder keeps its inner and trailing whitespace, as in Python.
      out.emplace_back(s.substr(pos));
      break;
    }
    size_t start = pos;
    while (pos < s.size() && !PySpaceAt(s, pos, &size)) pos += size;
    out.emplace_back(s.substr(start, pos - start));
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, std::optional<std::string_view> sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) return PySplit(s, sep, maxsplit);
  if (sep) {
    size_t end = s.size();
    while (maxsplit-- > 0 && end >= sep->size()) {
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  // Whitespace splitting from the right: work on code point offsets.
  std::vector<size_t> offsets = CodePointOffsets(s);
  auto is_space = [&](size_t i) { return IsPySpace(DecodeCodePoint(s, offsets[i]).value); };
  size_t i = offsets.size() - 1;  // exclusive end, in code points
  while (true) {
    while (i > 0 && is_space(i - 1)) --i;
    if (i == 0) break;
    if (maxsplit-- <= 0) {
      out.emplace_back(s.substr(0, offsets[i]));
      break;
    }
    size_t end = i;
    while (i > 0 && !is_space(i - 1)) --i;
    out.emplace_back(s.substr(offsets[i], offsets[end] - offsets[i]));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

size_t PySplitCount(std::string_view s, std::optional<std::string_view> sep, int64_t maxsplit) {
  if (maxsplit < 0) maxsplit = INT64_MAX;
  size_t pieces = 1;
  if (sep) {
    for (size_t hit = s.find(*sep); hit != std::string_view::npos && maxsplit-- > 0;
         hit = s.find(*sep, hit + sep->size())) {
      ++pieces;
    }
    return pieces;
  }
  // Runs of non-whitespace, at most maxsplit + 1 of them.
  size_t words = 0, size = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size(); pos += size) {
    bool space = PySpaceAt(s, pos, &size);
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return std::min<size_t>(words, static_cast<size_t>(std::min<int64_t>(maxsplit, INT64_MAX - 1)) + 1);
}

size_t PySplitLinesCount(std::string_view s) {
  size_t lines = 0, start = 0, pos = 0;
  while (pos < s.size()) {
    CodePoint cp = DecodeCodePoint(s, pos);
    pos += cp.size;
    if (!IsLineBoundary(cp.value)) continue;
    if (cp.value == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    ++lines;
    start = pos;
  }
  return lines + (start < s.size() ? 1 : 0);
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, pos = 0;
  while (pos < s.size()) {
    CodePoint cp = DecodeCodePoint(s, pos);
    if (!IsLineBoundary(cp.value)) {
      pos += cp.size;
      continue;
    }
    size_t end = pos + cp.size;
    if (cp.value == '\r' && end < s.size() && s[end] == '\n') ++end;
    out.emplace_back(s.substr(start, (keepends ? end : pos) - start));
    start = pos = end;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) { AppendUpper(c, &out); });
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) { AppendLower(c, &out); });
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) {
    if (first) {
      AppendTitle(c, &out);
      first = false;
    } else {
      AppendLower(c, &out);
    }
  });
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) {
    if (previous_cased) {
      AppendLower(c, &out);
    } else {
      AppendTitle(c, &out);
    }
    previous_cased = IsCased(c);
  });
  return out;
}

std::string PySwapCase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) {
    if (utf8proc_isupper(static_cast<utf8proc_int32_t>(c))) {
      AppendLower(c, &out);
    } else if (utf8proc_islower(static_cast<utf8proc_int32_t>(c))) {
      AppendUpper(c, &out);
    } else {
      AppendUtf8(out, c);
    }
  });
  return out;
}

bool PyIsUpper(std::string_view s) {
  bool cased = false, ok = true;
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) {
    if (utf8proc_islower(static_cast<utf8proc_int32_t>(c)) || Category(c) == UTF8PROC_CATEGORY_LT) ok = false;
    if (utf8proc_isupper(static_cast<utf8proc_int32_t>(c))) cased = true;
  });
  return ok && cased;
}

bool PyIsLower(std::string_view s) {
  bool cased = false, ok = true;
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) {
    if (utf8proc_isupper(static_cast<utf8proc_int32_t>(c)) || Category(c) == UTF8PROC_CATEGORY_LT) ok = false;
    if (utf8proc_islower(static_cast<utf8proc_int32_t>(c))) cased = true;
  });
  return ok && cased;
}

namespace {
template <typename Pred>
bool AllCodePoints(std::string_view s, Pred pred) {
  if (s.empty()) return false;
  bool all = true;
  ForEachCodePoint(s, [&](char32_t c, size_t, size_t) { all = all && pred(c); });
  return all;
}
}  // namespace

bool PyIsAlpha(std::string_view s) {
  return AllCodePoints(s, IsLetter);
}
bool PyIsDigit(std::string_view s) {
  return AllCodePoints(s, [](char32_t c) { return Category(c) == UTF8PROC_CATEGORY_ND; });
}
bool PyIsAlnum(std::string_view s) {
  return AllCodePoints(s, [](char32_t c) { return IsLetter(c) || IsNumeric(c); });
}
bool PyIsSpaceString(std::string_view s) {
  return AllCodePoints(s, IsPySpace);
}

std::string PyReplace(std::string_view s, std::string_view old_text, std::string_view new_text,
                      int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end.
    size_t pos = 0;
    while (pos < s.size()) {
      if (count > 0) {
        out += new_text;
        --count;
      }
      size_t size = DecodeCodePoint(s, pos).size;
      out += s.substr(pos, size);
      pos += size;
    }
    if (count > 0) out += new_text;
    return out;
  }
  size_t start = 0;
  while (count-- > 0) {
    size_t hit = s.find(old_text, start);
    if (hit == std::string_view::npos) break;
    out += s.substr(start, hit - start);
    out += new_text;
    start = hit + old_text.size();
  }
  out += s.substr(start);
  return out;
}

void AppendPyRepr(std::string_view s, std::string* out) {
  char quote = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) quote = '"';
  *out += quote;
  ForEachCodePoint(s, [&](char32_t c, size_t pos, size_t size) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      AppendHexEscape('x', c, 2, out);
    } else if (c < 0x7F || IsPyPrintable(c)) {
      *out += s.substr(pos, size);
    } else if (c <= 0xFF) {
      AppendHexEscape('x', c, 2, out);
    } else if (c <= 0xFFFF) {
      AppendHexEscape('u', c, 4, out);
    } else {
      AppendHexEscape('U', c, 8, out);
    }
  });
  *out += quote;
}

std::vector<int64_t> PySliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                    int64_t step) {
  // Mirrors CPython's PySlice_AdjustIndices.
  int64_t lo, hi;
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= length) {
      x = step < 0 ? length - 1 : length;
    }
    return x;
  };
  lo = adjust(start, step < 0 ? length - 1 : 0);
  hi = adjust(stop, step < 0 ? -1 : length);
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = lo; i < hi; i += step) out.push_back(i);
  } else {
    for (int64_t i = lo; i > hi; i += step) out.push_back(i);
  }
  return out;
}

void PyClampRange(int64_t length, std::optional<int64_t>* start, std::optional<int64_t>* end) {
  auto clamp = [&](std::optional<int64_t>* v, int64_t fallback) {
    if (!*v) {
      *v = fallback;
      return;
    }
    int64_t x = **v;
    if (x < 0) x = std::max<int64_t>(0, x + length);
    *v = std::min(x, length);
  };
  clamp(start, 0);
  clamp(end, length);
}

}  // namespace kiln::jinja
