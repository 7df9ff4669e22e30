// A recursive-descent GBNF reader; nesting depth is bounded, so the C++
// stack is too.
#include "grammar/gbnf_parser.h"

#include <unordered_map>

#include "core/utf8.h"

namespace kiln {
namespace {

using Sequence = GrammarBuilder::Sequence;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Expected<Grammar> Parse() {
    if (text_.size() > kMaxGrammarTextBytes) {
      return OutOfRange("grammar of {} bytes exceeds the limit of {}", text_.size(), kMaxGrammarTextBytes);
    }
    if (size_t bad = FirstInvalidUtf8(text_); bad != std::string_view::npos) {
      pos_ = bad;
      return Error("invalid UTF-8");
    }
    SkipSpace();
    if (pos_ == text_.size()) return Error("the grammar is empty");
    while (pos_ < text_.size()) KILN_RETURN_IF_ERROR(ParseRule());
    for (const auto& [rule, where] : first_use_) {
      if (!builder_.Defined(rule)) {
        pos_ = where;
        return Error(fmt::format("rule '{}' is used but never defined", builder_.rule_name_for_errors(rule)));
      }
    }
    if (!has_root_) {
      pos_ = 0;
      return Error("the grammar has no 'root' rule");
    }
    return std::move(builder_).Build("root");
  }

 private:
  Status ParseRule() {
    size_t name_start = pos_;
    std::string name = ReadName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace();
    if (text_.substr(pos_, 3) != "::=")
      return Error(fmt::format("expected '::=' after rule name '{}'", name));
    pos_ += 3;
    uint32_t rule = builder_.RuleId(name);
    if (builder_.Defined(rule)) {
      pos_ = name_start;
      return Error(fmt::format("rule '{}' is defined twice", name));
    }
    if (name == "root") has_root_ = true;
    current_rule_ = name;
    std::vector<Sequence> alternatives;
    KILN_RETURN_IF_ERROR(ParseAlternatives(0, alternatives));
    if (pos_ < text_.size() && text_[pos_] == ')') return Error("unbalanced ')'");
    return Define(rule, std::move(alternatives));
  }

  Status ParseAlternatives(int depth, std::vector<Sequence>& alternatives) {
    if (depth > kMaxGrammarNestingDepth) {
      return Error(fmt::format("parentheses nested deeper than {}", kMaxGrammarNestingDepth),
                   StatusCode::kOutOfRange);
    }
    for (;;) {
      Sequence seq;
      KILN_RETURN_IF_ERROR(ParseSequence(depth, seq));
      alternatives.push_back(std::move(seq));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return Status::Ok();
    }
  }

  Status ParseSequence(int depth, Sequence& seq) {
    for (;;) {
      SkipSpace();
      if (pos_ >= text_.size()) return Status::Ok();
      char c = text_[pos_];
      size_t item_start = seq.size();
      if (c == '"') {
        KILN_RETURN_IF_ERROR(ParseLiteral(seq));
      } else if (c == '[') {
        KILN_ASSIGN_OR_RETURN(CharSet set, ParseClass());
        seq.push_back(builder_.Chars(std::move(set)));
      } else if (c == '.') {
        ++pos_;
        seq.push_back(builder_.Chars(CharSet{{}, true}));
      } else if (c == '(') {
        ++pos_;
        std::vector<Sequence> inner;
        KILN_RETURN_IF_ERROR(ParseAlternatives(depth + 1, inner));
        SkipSpace();
        if (pos_ >= text_.size() || text_[pos_] != ')') return Error("expected ')'");
        ++pos_;
        if (inner.size() == 1) {
          seq.insert(seq.end(), inner[0].begin(), inner[0].end());
        } else {
          uint32_t group = builder_.NewHelperRule(current_rule_);
          KILN_RETURN_IF_ERROR(Define(group, std::move(inner)));
          seq.push_back({GrammarElement::Kind::kRuleRef, group});
        }
      } else if (IsNameChar(c)) {
        if (AtRuleStart()) return Status::Ok();
        size_t where = pos_;
        std::string name = ReadName();
        uint32_t rule = builder_.RuleId(name);
        first_use_.emplace(rule, where);
        seq.push_back({GrammarElement::Kind::kRuleRef, rule});
      } else if (c == '|' || c == ')') {
        return Status::Ok();
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return Error(fmt::format("'{}' does not follow anything it could repeat", c));
      } else {
        return Error(fmt::format("unexpected character '{}'", c));
      }
      KILN_RETURN_IF_ERROR(ParseRepetition(seq, item_start));
    }
  }

  // Applies a quantifier after the item that starts at seq[item_start].
  Status ParseRepetition(Sequence& seq, size_t item_start) {
    SkipSpaceOnLine();
    if (pos_ >= text_.size()) return Status::Ok();
    uint32_t min = 0, max = 0;
    bool unbounded = false;
    char c = text_[pos_];
    if (c == '*') {
      unbounded = true;
    } else if (c == '+') {
      min = 1, unbounded = true;
    } else if (c == '?') {
      max = 1;
    } else if (c == '{') {
      ++pos_;
      SkipSpace();
      KILN_ASSIGN_OR_RETURN(min, ReadCount());
      SkipSpace();
      max = min;
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        SkipSpace();
        if (pos_ < text_.size() && text_[pos_] == '}') {
          unbounded = true;
        } else {
          KILN_ASSIGN_OR_RETURN(max, ReadCount());
          if (max < min) return Error(fmt::format("repetition {{{},{}}} has max below min", min, max));
        }
        SkipSpace();
      }
      if (pos_ >= text_.size() || text_[pos_] != '}') return Error("expected '}' to close the repetition");
    } else {
      return Status::Ok();
    }
    ++pos_;
    Sequence item(seq.begin() + static_cast<ptrdiff_t>(item_start), seq.end());
    seq.resize(item_start);
    // A multi-element item (a literal, a group) becomes one rule reference.
    if (item.size() != 1) {
      uint32_t wrapped = builder_.NewHelperRule(current_rule_);
      KILN_RETURN_IF_ERROR(Define(wrapped, {item}));
      item = {{GrammarElement::Kind::kRuleRef, wrapped}};
    }
    for (uint32_t i = 0; i < min; ++i) {
      seq.push_back(item[0]);
      if (seq.size() > kMaxGrammarElements) {
        return Error("repetition makes the grammar too large", StatusCode::kOutOfRange);
      }
    }
    if (unbounded) {
      // star ::= item star | (empty)
      uint32_t star = builder_.NewHelperRule(current_rule_);
      KILN_RETURN_IF_ERROR(Define(star, {{item[0], {GrammarElement::Kind::kRuleRef, star}}, {}}));
      seq.push_back({GrammarElement::Kind::kRuleRef, star});
    } else if (max > min) {
      // optional_k ::= item optional_{k+1} | (empty), built from the last.
      uint32_t next = 0;
      for (uint32_t i = 0; i < max - min; ++i) {
        uint32_t opt = builder_.NewHelperRule(current_rule_);
        Sequence body = {item[0]};
        if (i > 0) body.push_back({GrammarElement::Kind::kRuleRef, next});
        KILN_RETURN_IF_ERROR(Define(opt, {body, {}}));
        next = opt;
      }
      seq.push_back({GrammarElement::Kind::kRuleRef, next});
    }
    return Status::Ok();
  }

  Expected<uint32_t> ReadCount() {
    size_t start = pos_;
    uint64_t n = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      n = n * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (n > kMaxGrammarRepetition) {
        return Error(fmt::format("repetition count exceeds the limit of {}", kMaxGrammarRepetition),
                     StatusCode::kOutOfRange);
      }
      ++pos_;
    }
    if (pos_ == start) return Error("expected a repetition count");
    return static_cast<uint32_t>(n);
  }

  Status ParseLiteral(Sequence& seq) {
    size_t start = pos_++;  // the opening quote
    for (;;) {
      if (pos_ >= text_.size()) {
        pos_ = start;
        return Error("unterminated string literal");
      }
      if (text_[pos_] == '"') {
        ++pos_;
        return Status::Ok();
      }
      KILN_ASSIGN_OR_RETURN(char32_t cp, ReadChar());
      seq.push_back(builder_.Chars(CharSet{{{cp, cp}}, false}));
    }
  }

  Expected<CharSet> ParseClass() {
    size_t start = pos_++;  // '['
    CharSet set;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      set.negated = true;
      ++pos_;
    }
    for (;;) {
      if (pos_ >= text_.size()) {
        pos_ = start;
        return Error("unterminated character class");
      }
      if (text_[pos_] == ']') {
        ++pos_;
        return set;
      }
      KILN_ASSIGN_OR_RETURN(char32_t lo, ReadChar());
      char32_t hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        KILN_ASSIGN_OR_RETURN(hi, ReadChar());
        if (hi < lo) return Error("character range with its end before its start");
      }
      set.ranges.push_back({lo, hi});
    }
  }

  // One character of a literal or class, escapes resolved.
  Expected<char32_t> ReadChar() {
    if (text_[pos_] != '\\') {
      char32_t cp;
      pos_ += DecodeUtf8At(text_, pos_, &cp);
      return cp;
    }
    ++pos_;
    if (pos_ >= text_.size()) return Error("escape at the end of the grammar");
    char c = text_[pos_++];
    switch (c) {
      case 'n': return U'\n';
      case 't': return U'\t';
      case 'r': return U'\r';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^': return static_cast<char32_t>(c);
      case 'x': return ReadHex(2);
      case 'u': return ReadHex(4);
      case 'U': return ReadHex(8);
      default: --pos_; return Error(fmt::format("unknown escape '\\{}'", c));
    }
  }

  Expected<char32_t> ReadHex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size()) return Error("truncated hex escape");
      char c = text_[pos_];
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Error(fmt::format("expected {} hex digits", digits));
      }
      value = value * 16 + d;
      ++pos_;
    }
    if (value > 0x10FFFF) return Error("code point beyond U+10FFFF");
    return static_cast<char32_t>(value);
  }

  // Whether a `name ::=` starts at pos_ (so the current rule ends here).
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\r' || text_[p] == '\n'))
      ++p;
    return text_.substr(p, 3) == "::=";
  }

  std::string ReadName() {
    size_t start = pos_;
    while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  void SkipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else {
        return;
      }
    }
  }

  // Quantifiers must follow their item on the same line.
  void SkipSpaceOnLine() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  Status Define(uint32_t rule, std::vector<Sequence> alternatives) {
    Status s = builder_.Define(rule, std::move(alternatives));
    return s.ok() ? s : Error(s.message(), s.code());
  }

  Status Error(const std::string& what, StatusCode code = StatusCode::kInvalidArgument) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    return Status(code, fmt::format("grammar line {}, column {}: {}", line, column, what));
  }

  std::string_view text_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
  std::string current_rule_;
  bool has_root_ = false;
  std::unordered_map<uint32_t, size_t> first_use_;
};

}  // namespace

Expected<Grammar> ParseGbnf(std::string_view text) {
  return GbnfParser(text).Parse();
}

}  // namespace kiln
