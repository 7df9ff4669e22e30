// The template lexer (see lexer.h). The rules follow jinja2's: which text
// a tag's "-" or "+" strips, where lstrip_blocks applies, how numbers and
// string escapes read.
#include "jinja/lexer.h"

#include <algorithm>
#include <cstdlib>

#include "core/utf8.h"
#include "jinja/py_string.h"

namespace kiln::jinja {
namespace {

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsHexDigit(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) {
  return IsNameStart(c) || IsDigit(c);
}

int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  return (c | 0x20) - 'a' + 10;
}

// Newlines become "\n" and one trailing newline goes, as jinja2 does before
// lexing (keep_trailing_newline is off).
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Decodes a string literal's body with Python's unicode-escape rules, as
// jinja2 does (after escaping non-ASCII characters with backslashreplace,
// which is why a backslash before a non-ASCII character reads literally).
Expected<std::string> DecodeStringLiteral(std::string_view body) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    ++i;  // the lexer guarantees a character after every backslash
    char e = body[i];
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          if (i + 1 + k >= body.size() || !IsHexDigit(body[i + 1 + k])) {
            return InvalidArgument("truncated \\{}{} escape in string literal", e, std::string(digits, 'X'));
          }
          cp = cp * 16 + static_cast<uint32_t>(HexValue(body[i + 1 + k]));
        }
        i += digits;
        if (cp > 0x10FFFF) return InvalidArgument("illegal Unicode character in string literal");
        if (cp >= 0xD800 && cp <= 0xDFFF) {
          return InvalidArgument("lone surrogate \\u{:04x} in string literal", cp);
        }
        AppendUtf8(out, cp);
        break;
      }
      case 'N': return InvalidArgument("\\N{{...}} escapes are not supported in string literals");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = 0;
          size_t k = 0;
          while (k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7') {
            cp = cp * 8 + static_cast<uint32_t>(body[i + k] - '0');
            ++k;
          }
          i += k - 1;
          AppendUtf8(out, cp);
        } else if (static_cast<unsigned char>(e) >= 0x80) {
          CodePoint cp = DecodeCodePoint(body, i);
          out += '\\';
          if (cp.value <= 0xFF) {
            out += fmt::format("x{:02x}", static_cast<uint32_t>(cp.value));
          } else if (cp.value <= 0xFFFF) {
            out += fmt::format("u{:04x}", static_cast<uint32_t>(cp.value));
          } else {
            out += fmt::format("U{:08x}", static_cast<uint32_t>(cp.value));
          }
          i += cp.size - 1;
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(NormalizeNewlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Expected<std::vector<Token>> Run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t tag = FindTagStart(pos);
      if (tag == std::string::npos) {
        Emit(TokenKind::kData, src_.substr(pos), pos);
        break;
      }
      char type = src_[tag + 1];
      size_t after = tag + 2;
      char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      if (sign) ++after;

      size_t raw_body = type == '%' ? MatchRawBegin(after) : std::string::npos;
      EmitText(pos, tag, sign, /*lstrip_allowed=*/type != '{');
      if (raw_body != std::string::npos) {
        KILN_ASSIGN_OR_RETURN(pos, LexRaw(tag, raw_body));
      } else if (type == '#') {
        KILN_ASSIGN_OR_RETURN(pos, SkipComment(tag, after));
      } else {
        KILN_ASSIGN_OR_RETURN(pos, LexTag(tag, after, type == '%'));
      }
    }
    Token eof{TokenKind::kEof, "", 0, 0, PositionOf(src_.size())};
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  SourcePos PositionOf(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  Status Fail(size_t offset, const Status& status) const { return ErrorAt(PositionOf(offset), status); }

  void Emit(TokenKind kind, std::string_view text, size_t offset) {
    tokens_.push_back(Token{kind, std::string(text), 0, 0, PositionOf(offset)});
  }

  // The first "{{", "{%" or "{#" at or after `pos`.
  size_t FindTagStart(size_t pos) const {
    while (true) {
      pos = src_.find('{', pos);
      if (pos == std::string::npos || pos + 1 >= src_.size()) return std::string::npos;
      char next = src_[pos + 1];
      if (next == '{' || next == '%' || next == '#') return pos;
      ++pos;
    }
  }

  size_t SkipSpaces(size_t pos) const {
    size_t size = 0;
    while (pos < src_.size() && PySpaceAt(src_, pos, &size)) pos += size;
    return pos;
  }

  // After "{%" and its sign: if the tag is `raw`, the offset where the raw
  // text starts; npos otherwise.
  size_t MatchRawBegin(size_t pos) const {
    pos = SkipSpaces(pos);
    if (src_.compare(pos, 3, "raw") != 0) return std::string::npos;
    pos = SkipSpaces(pos + 3);
    if (src_.compare(pos, 3, "-%}") == 0) return SkipSpaces(pos + 3);
    if (src_.compare(pos, 2, "%}") == 0) return pos + 2;
    return std::string::npos;
  }

  // Emits the template text in [begin, end) before a tag, applying the
  // tag's whitespace control: "-" strips all whitespace before it; otherwise
  // lstrip_blocks strips spaces between the line start and a block or
  // comment tag, unless the tag says "+".
  void EmitText(size_t begin, size_t end, char sign, bool lstrip_allowed) {
    std::string_view text(src_.data() + begin, end - begin);
    if (sign == '-') {
      text = PyStrip(text, std::nullopt, false, true);
    } else if (sign != '+' && lstrip_allowed) {
      size_t line_start = text.rfind('\n');
      line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
      if (line_start > 0 || line_starting_) {
        std::string_view tail = text.substr(line_start);
        if (!tail.empty() && PyStrip(tail, std::nullopt, true, false).empty()) {
          text = text.substr(0, line_start);
        }
      }
    }
    if (!text.empty()) Emit(TokenKind::kData, text, begin);
  }

  // Sets line_starting_ from the last character a rule consumed.
  void EndedAt(size_t pos) { line_starting_ = pos > 0 && src_[pos - 1] == '\n'; }

  Expected<size_t> SkipComment(size_t tag, size_t body) {
    size_t close = src_.find("#}", body);
    if (close == std::string::npos) return Fail(tag, InvalidArgument("missing end of comment tag"));
    size_t end = close + 2;
    char sign = close > body ? src_[close - 1] : 0;
    if (sign == '-') {
      end = SkipSpaces(end);
    } else if (sign != '+' && end < src_.size() && src_[end] == '\n') {
      ++end;  // trim_blocks
    }
    EndedAt(end);
    return end;
  }

  // Emits the text of a raw block and returns the offset after its endraw.
  Expected<size_t> LexRaw(size_t tag, size_t body) {
    line_starting_ = body > 0 && src_[body - 1] == '\n';
    size_t search = body;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos) return Fail(tag, InvalidArgument("missing end of raw directive"));
      size_t p = open + 2;
      char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign) ++p;
      p = SkipSpaces(p);
      if (src_.compare(p, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      p = SkipSpaces(p + 6);
      size_t end;
      if (src_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        end = SkipSpaces(p + 3);
      } else if (src_.compare(p, 2, "%}") == 0) {
        end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        search = open + 2;
        continue;
      }
      EmitText(body, open, sign, true);
      EndedAt(end);
      return end;
    }
  }

  // Tokenizes the inside of a {{ }} or {% %} tag; returns the offset after
  // its end delimiter (or the end of the source when the tag is unclosed,
  // which the parser reports).
  Expected<size_t> LexTag(size_t tag, size_t pos, bool block) {
    Emit(block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin, block ? "{%" : "{{", tag);
    std::vector<char> open_brackets;
    while (pos < src_.size()) {
      if (open_brackets.empty()) {
        size_t end = MatchTagEnd(pos, block);
        if (end != std::string::npos) {
          Emit(block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd, block ? "%}" : "}}", pos);
          EndedAt(end);
          return end;
        }
      }
      size_t size = 0;
      if (PySpaceAt(src_, pos, &size)) {
        pos = SkipSpaces(pos);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(size_t next, LexTagToken(pos, &open_brackets));
      pos = next;
    }
    EndedAt(pos);
    return pos;
  }

  size_t MatchTagEnd(size_t pos, bool block) const {
    if (block) {
      if (src_.compare(pos, 3, "+%}") == 0) return pos + 3;
      if (src_.compare(pos, 3, "-%}") == 0) return SkipSpaces(pos + 3);
      if (src_.compare(pos, 2, "%}") == 0) {
        pos += 2;
        return pos < src_.size() && src_[pos] == '\n' ? pos + 1 : pos;  // trim_blocks
      }
      return std::string::npos;
    }
    if (src_.compare(pos, 3, "-}}") == 0) return SkipSpaces(pos + 3);
    if (src_.compare(pos, 2, "}}") == 0) return pos + 2;
    return std::string::npos;
  }

  // Digits optionally separated by single underscores: (\d+_)*\d+.
  size_t MatchDigits(size_t pos) const {
    if (pos >= src_.size() || !IsDigit(src_[pos])) return std::string::npos;
    while (pos < src_.size() && IsDigit(src_[pos])) ++pos;
    while (pos + 1 < src_.size() && src_[pos] == '_' && IsDigit(src_[pos + 1])) {
      pos += 1;
      while (pos < src_.size() && IsDigit(src_[pos])) ++pos;
    }
    return pos;
  }

  // jinja2's float rule: digits, then a fraction and/or an exponent; never
  // right after a dot (so `x.0.1` reads as two subscripts).
  size_t MatchFloat(size_t pos) const {
    if (pos > 0 && src_[pos - 1] == '.') return std::string::npos;
    size_t whole = MatchDigits(pos);
    if (whole == std::string::npos) return std::string::npos;
    auto exponent = [&](size_t p) -> size_t {
      if (p >= src_.size() || (src_[p] | 0x20) != 'e') return std::string::npos;
      ++p;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      return MatchDigits(p);
    };
    size_t fraction = src_.compare(whole, 1, ".") == 0 ? MatchDigits(whole + 1) : std::string::npos;
    if (fraction != std::string::npos) {
      size_t e = exponent(fraction);
      return e != std::string::npos ? e : fraction;
    }
    return exponent(whole);
  }

  // jinja2's integer rule: 0b/0o/0x prefixes, or decimal without leading zeros.
  size_t MatchInteger(size_t pos, int* base) const {
    auto digits_of = [&](size_t p, auto valid) -> size_t {
      size_t start = p;
      while (true) {
        size_t q = p;
        if (q < src_.size() && src_[q] == '_') ++q;
        if (q < src_.size() && valid(src_[q])) {
          p = q + 1;
        } else {
          break;
        }
      }
      return p > start ? p : std::string::npos;
    };
    if (pos + 1 < src_.size() && src_[pos] == '0') {
      char prefix = static_cast<char>(src_[pos + 1] | 0x20);
      size_t end = std::string::npos;
      if (prefix == 'b') {
        end = digits_of(pos + 2, [](char c) { return c == '0' || c == '1'; });
        *base = 2;
      } else if (prefix == 'o') {
        end = digits_of(pos + 2, [](char c) { return c >= '0' && c <= '7'; });
        *base = 8;
      } else if (prefix == 'x') {
        end = digits_of(pos + 2, IsHexDigit);
        *base = 16;
      }
      if (end != std::string::npos) return end;
    }
    *base = 10;
    if (pos < src_.size() && src_[pos] >= '1' && src_[pos] <= '9') {
      size_t end = digits_of(pos + 1, IsDigit);
      return end == std::string::npos ? pos + 1 : end;
    }
    if (pos < src_.size() && src_[pos] == '0') {
      size_t end = digits_of(pos + 1, [](char c) { return c == '0'; });
      return end == std::string::npos ? pos + 1 : end;
    }
    return std::string::npos;
  }

  Expected<size_t> LexTagToken(size_t pos, std::vector<char>* open_brackets) {
    if (size_t end = MatchFloat(pos); end != std::string::npos) {
      std::string text;
      for (size_t i = pos; i < end; ++i) {
        if (src_[i] != '_') text += src_[i];
      }
      Emit(TokenKind::kFloat, src_.substr(pos, end - pos), pos);
      tokens_.back().float_value = std::strtod(text.c_str(), nullptr);
      return end;
    }
    int base = 10;
    if (size_t end = MatchInteger(pos, &base); end != std::string::npos) {
      uint64_t value = 0;
      for (size_t i = pos + (base == 10 ? 0 : 2); i < end; ++i) {
        if (src_[i] == '_') continue;
        uint64_t digit = static_cast<uint64_t>(HexValue(src_[i]));
        if (value > (static_cast<uint64_t>(INT64_MAX) - digit) / static_cast<uint64_t>(base)) {
          return Fail(pos, OutOfRange("integer literal {} is too large", src_.substr(pos, end - pos)));
        }
        value = value * static_cast<uint64_t>(base) + digit;
      }
      Emit(TokenKind::kInteger, src_.substr(pos, end - pos), pos);
      tokens_.back().int_value = static_cast<int64_t>(value);
      return end;
    }
    char c = src_[pos];
    if (IsNameStart(c)) {
      size_t end = pos + 1;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      Emit(TokenKind::kName, src_.substr(pos, end - pos), pos);
      return end;
    }
    if (c == '\'' || c == '"') {
      size_t end = pos + 1;
      while (end < src_.size() && src_[end] != c) end += src_[end] == '\\' ? 2 : 1;
      if (end >= src_.size()) return Fail(pos, InvalidArgument("unterminated string literal"));
      auto decoded = DecodeStringLiteral(std::string_view(src_).substr(pos + 1, end - pos - 1));
      if (!decoded.ok()) return Fail(pos, decoded.status());
      Emit(TokenKind::kString, *decoded, pos);
      return end + 1;
    }
    static const char* const kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                             "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                             ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOperators) {
      std::string_view spelling(op);
      if (src_.compare(pos, spelling.size(), spelling) != 0) continue;
      if (spelling == "(" || spelling == "[" || spelling == "{") {
        open_brackets->push_back(spelling == "(" ? ')' : spelling == "[" ? ']' : '}');
      } else if (spelling == ")" || spelling == "]" || spelling == "}") {
        if (open_brackets->empty()) return Fail(pos, InvalidArgument("unexpected '{}'", spelling));
        char expected = open_brackets->back();
        open_brackets->pop_back();
        if (expected != spelling[0]) {
          return Fail(pos, InvalidArgument("unexpected '{}', expected '{}'", spelling, expected));
        }
      }
      Emit(TokenKind::kOperator, spelling, pos);
      return pos + spelling.size();
    }
    CodePoint cp = DecodeCodePoint(src_, pos);
    return Fail(pos, InvalidArgument("unexpected character '{}'", src_.substr(pos, cp.size)));
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;
};

}  // namespace

namespace {
// Whether `message` already starts with "line:column: ".
bool HasPosition(std::string_view message) {
  size_t i = 0;
  for (int part = 0; part < 2; ++part) {
    size_t start = i;
    while (i < message.size() && IsDigit(message[i])) ++i;
    if (i == start || i >= message.size() || message[i] != ':') return false;
    ++i;
  }
  return i < message.size() && message[i] == ' ';
}
}  // namespace

Status ErrorAt(SourcePos pos, const Status& status) {
  if (status.ok() || HasPosition(status.message())) return status;
  return Status(status.code(), fmt::format("{}:{}: {}", pos.line, pos.column, status.message()));
}

Expected<std::vector<Token>> Lex(std::string_view source) {
  if (size_t bad = FirstInvalidUtf8(source); bad != std::string_view::npos) {
    return InvalidArgument("template is not valid UTF-8 (byte offset {})", bad);
  }
  return Lexer(source).Run();
}

}  // namespace kiln::jinja
