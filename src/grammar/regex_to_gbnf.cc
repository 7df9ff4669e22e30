// A recursive-descent reader of the regex subset that writes GBNF as it goes.
#include "grammar/regex_to_gbnf.h"

#include <algorithm>
#include <vector>

#include "core/utf8.h"
#include "grammar/gbnf_text.h"
#include "grammar/grammar.h"

namespace kiln {
namespace {

struct Range {
  char32_t lo, hi;
};

const std::vector<Range> kDigit = {{'0', '9'}};
const std::vector<Range> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<Range> kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}};

// The JSON spelling of one character of the string's value, as GBNF.
std::string JsonCharLiteral(char32_t cp) {
  switch (cp) {
    case '"': return GbnfLiteral("\\\"");
    case '\\': return GbnfLiteral("\\\\");
    case '\n': return GbnfLiteral("\\n");
    case '\t': return GbnfLiteral("\\t");
    case '\r': return GbnfLiteral("\\r");
    default: break;
  }
  std::string utf8;
  AppendUtf8(utf8, cp);
  return GbnfLiteral(utf8);
}

// A set of characters as GBNF over their JSON spellings.
std::string SetToGbnf(std::vector<Range> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  std::vector<std::string> alternatives;
  if (negated) {
    // Everything outside the ranges, the quote, the backslash and controls;
    // then the escaped forms of those three kinds where the set admits them.
    std::string cls = "[^\\\"\\\\\\x00-\\x1F";
    for (const Range& r : ranges) cls += GbnfClassChar(r.lo) + (r.hi > r.lo ? "-" + GbnfClassChar(r.hi) : "");
    alternatives.push_back(cls + "]");
    for (char32_t special : {U'"', U'\\', U'\n', U'\t', U'\r'}) {
      bool excluded = std::any_of(ranges.begin(), ranges.end(),
                                  [&](const Range& r) { return special >= r.lo && special <= r.hi; });
      if (!excluded) alternatives.push_back(JsonCharLiteral(special));
    }
  } else {
    std::string cls;
    for (const Range& r : ranges) {
      // Split each range around the characters JSON escapes.
      char32_t lo = std::max<char32_t>(r.lo, 0x20);
      for (char32_t cut : {U'"', U'\\'}) {
        if (lo <= cut && cut <= r.hi) {
          if (lo < cut) cls += GbnfClassChar(lo) + (cut - 1 > lo ? "-" + GbnfClassChar(cut - 1) : "");
          alternatives.push_back(JsonCharLiteral(cut));
          lo = cut + 1;
        }
      }
      if (lo <= r.hi) cls += GbnfClassChar(lo) + (r.hi > lo ? "-" + GbnfClassChar(r.hi) : "");
      for (char32_t special : {U'\n', U'\t', U'\r'}) {
        if (special >= r.lo && special <= r.hi) alternatives.push_back(JsonCharLiteral(special));
      }
    }
    if (!cls.empty()) alternatives.insert(alternatives.begin(), "[" + cls + "]");
  }
  if (alternatives.empty()) return "";
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

class RegexReader {
 public:
  explicit RegexReader(std::string_view pattern) : p_(pattern) {}

  Expected<std::string> Translate() {
    if (p_.size() > kMaxPatternBytes) {
      return OutOfRange("pattern of {} bytes exceeds the limit of {}", p_.size(), kMaxPatternBytes);
    }
    if (!IsValidUtf8(p_)) return InvalidArgument("pattern is not valid UTF-8");
    bool anchored_start = !p_.empty() && p_[0] == '^';
    if (anchored_start) ++pos_;
    KILN_ASSIGN_OR_RETURN(std::string body, Alternation(0));
    bool anchored_end = false;
    if (pos_ < p_.size() && p_[pos_] == '$') {
      anchored_end = true;
      ++pos_;
    }
    if (pos_ < p_.size()) return Error(p_[pos_] == ')' ? "unbalanced ')'" : "'$' or '^' inside the pattern");
    std::string out = anchored_start ? "" : "json-char* ";
    out += "(" + body + ")";
    if (!anchored_end) out += " json-char*";
    return out;
  }

 private:
  Expected<std::string> Alternation(int depth) {
    if (depth > kMaxPatternNestingDepth) return Error("groups nested too deeply");
    std::string out;
    for (;;) {
      KILN_ASSIGN_OR_RETURN(std::string seq, Sequence(depth));
      out += seq.empty() ? "\"\"" : seq;
      if (pos_ < p_.size() && p_[pos_] == '|') {
        ++pos_;
        out += " | ";
        continue;
      }
      return out;
    }
  }

  Expected<std::string> Sequence(int depth) {
    std::string out;
    while (pos_ < p_.size()) {
      char c = p_[pos_];
      if (c == '|' || c == ')') break;
      if (c == '$' && pos_ + 1 == p_.size()) break;
      KILN_ASSIGN_OR_RETURN(std::string atom, Atom(depth));
      KILN_ASSIGN_OR_RETURN(std::string quantifier, Quantifier());
      if (!out.empty()) out += " ";
      out += quantifier.empty() ? atom : "(" + atom + ")" + quantifier;
    }
    return out;
  }

  Expected<std::string> Atom(int depth) {
    char c = p_[pos_];
    if (c == '(') {
      ++pos_;
      if (p_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (pos_ < p_.size() && p_[pos_] == '?') {
        return Error("lookaround and named groups '(?' are not supported");
      }
      KILN_ASSIGN_OR_RETURN(std::string inner, Alternation(depth + 1));
      if (pos_ >= p_.size() || p_[pos_] != ')') return Error("missing ')'");
      ++pos_;
      return "(" + inner + ")";
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++pos_;
      return SetToGbnf({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true);
    }
    if (c == '^' || c == '$') return Error("'$' or '^' inside the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{')
      return Error(fmt::format("nothing to repeat before '{}'", c));
    if (c == '\\') {
      std::vector<Range> set;
      bool negated = false;
      KILN_ASSIGN_OR_RETURN(char32_t cp, Escape(&set, &negated));
      if (!set.empty()) return SetToGbnf(set, negated);
      return JsonCharLiteral(cp);
    }
    char32_t cp;
    pos_ += DecodeUtf8At(p_, pos_, &cp);
    return JsonCharLiteral(cp);
  }

  Expected<std::string> Class() {
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < p_.size() && p_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<Range> ranges;
    bool first = true;
    for (;;) {
      if (pos_ >= p_.size()) return Error("unterminated character class");
      if (p_[pos_] == ']' && !first) break;
      first = false;
      KILN_ASSIGN_OR_RETURN(char32_t lo, ClassChar(&ranges));
      if (lo == kInvalidCodePoint) continue;  // a shorthand class, added already
      char32_t hi = lo;
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        std::vector<Range> shorthand;
        KILN_ASSIGN_OR_RETURN(hi, ClassChar(&shorthand));
        if (hi == kInvalidCodePoint) return Error("a class shorthand cannot end a range");
        if (hi < lo) return Error("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    std::string out = SetToGbnf(ranges, negated);
    if (out.empty()) return Error("character class that matches nothing");
    return out;
  }

  // One class member; a shorthand (\d) adds its ranges and reads as
  // kInvalidCodePoint.
  Expected<char32_t> ClassChar(std::vector<Range>* ranges) {
    if (p_[pos_] != '\\') {
      char32_t cp;
      pos_ += DecodeUtf8At(p_, pos_, &cp);
      return cp;
    }
    std::vector<Range> set;
    bool negated = false;
    KILN_ASSIGN_OR_RETURN(char32_t cp, Escape(&set, &negated));
    if (set.empty()) return cp;
    if (negated) return Error("negated shorthand (\\D, \\W, \\S) inside a class is not supported");
    ranges->insert(ranges->end(), set.begin(), set.end());
    return kInvalidCodePoint;
  }

  // After a backslash: a character, or a shorthand class in *set.
  Expected<char32_t> Escape(std::vector<Range>* set, bool* negated) {
    ++pos_;
    if (pos_ >= p_.size()) return Error("pattern ends with a backslash");
    char c = p_[pos_++];
    switch (c) {
      case 'd': *set = kDigit; return 0;
      case 'D': *set = kDigit, *negated = true; return 0;
      case 'w': *set = kWord; return 0;
      case 'W': *set = kWord, *negated = true; return 0;
      case 's': *set = kSpace; return 0;
      case 'S': *set = kSpace, *negated = true; return 0;
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case 'u': {
        if (pos_ + 4 > p_.size()) return Error("\\u needs four hex digits");
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) {
          char h = p_[pos_++];
          int d = h >= '0' && h <= '9'   ? h - '0'
                  : h >= 'a' && h <= 'f' ? h - 'a' + 10
                  : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                         : -1;
          if (d < 0) return Error("\\u needs four hex digits");
          v = v * 16 + static_cast<uint32_t>(d);
        }
        return static_cast<char32_t>(v);
      }
      case 'b':
      case 'B': return Error(fmt::format("word boundary '\\{}' is not supported", c));
      default:
        if ((c >= '1' && c <= '9') || c == 'k') return Error("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          return Error(fmt::format("escape '\\{}' is not supported", c));
        }
        return static_cast<char32_t>(static_cast<unsigned char>(c));  // escaped punctuation
    }
  }

  Expected<std::string> Quantifier() {
    if (pos_ >= p_.size()) return std::string();
    char c = p_[pos_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) return Error("unterminated '{' quantifier");
      std::string_view body = p_.substr(pos_ + 1, close - pos_ - 1);
      bool valid = !body.empty() && (body[0] >= '0' && body[0] <= '9') &&
                   std::all_of(body.begin(), body.end(),
                               [](char ch) { return (ch >= '0' && ch <= '9') || ch == ','; }) &&
                   std::count(body.begin(), body.end(), ',') <= 1;
      if (!valid) return Error("malformed '{m,n}' quantifier");
      // Counts are checked here so that the error names the pattern.
      size_t comma = body.find(',');
      std::string_view first = body.substr(0, comma);
      std::string_view second = comma == std::string_view::npos ? first : body.substr(comma + 1);
      auto too_big = [](std::string_view digits) {
        return digits.size() > 9 ||
               (!digits.empty() && std::stoul(std::string(digits)) > kMaxGrammarRepetition);
      };
      if (too_big(first) || too_big(second)) {
        return Error(fmt::format("repetition counts above {} are not supported", kMaxGrammarRepetition));
      }
      if (!second.empty() && std::stoul(std::string(second)) < std::stoul(std::string(first))) {
        return Error("quantifier {m,n} with n below m");
      }
      q = "{" + std::string(body) + "}";
      pos_ = close + 1;
    } else {
      return std::string();
    }
    if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy: the same strings
    if (pos_ < p_.size() && (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '{')) {
      return Error("a quantifier cannot follow a quantifier");
    }
    return q;
  }

  Status Error(const std::string& what) const {
    return InvalidArgument("pattern {}: at offset {}: {}", GbnfLiteral(p_), pos_, what);
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

Expected<std::string> RegexToGbnf(std::string_view pattern) {
  return RegexReader(pattern).Translate();
}

}  // namespace kiln
