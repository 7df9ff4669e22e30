// A compiled context-free grammar over Unicode code points: rules made of
// alternatives, each a sequence of character sets and rule references, laid
// out flat so that a position in the grammar is one integer.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace kiln {

// Limits that keep an untrusted grammar from exhausting memory or stack.
inline constexpr size_t kMaxGrammarTextBytes = 1 << 20;  // GBNF source
inline constexpr size_t kMaxGrammarElements = 1 << 20;   // after repetitions are expanded
inline constexpr size_t kMaxGrammarRules = 1 << 16;
inline constexpr int kMaxGrammarNestingDepth = 64;        // parentheses
inline constexpr uint32_t kMaxGrammarRepetition = 10000;  // the n of x{m,n}

// A set of code points: sorted, disjoint, inclusive ranges, possibly negated.
struct CharSet {
  struct Range {
    char32_t lo, hi;
  };
  std::vector<Range> ranges;
  bool negated = false;

  bool Contains(char32_t cp) const;
  // Whether some code point in [lo, hi] is in the set.
  bool Intersects(char32_t lo, char32_t hi) const;
  // Whether every code point in [lo, hi] is in the set.
  bool ContainsAll(char32_t lo, char32_t hi) const;
};

struct GrammarElement {
  enum class Kind : uint8_t {
    kEnd,      // the end of an alternative
    kChars,    // one code point from char_sets[index]
    kRuleRef,  // the rule `index`
  };
  Kind kind = Kind::kEnd;
  uint32_t index = 0;
};

// Rule r's alternatives start at elements[alternatives[r][i]] and run to the
// next kEnd. Build one with GrammarBuilder; a Grammar that exists is checked.
class Grammar {
 public:
  const std::vector<GrammarElement>& elements() const { return elements_; }
  const std::vector<CharSet>& char_sets() const { return char_sets_; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alternatives_[rule]; }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  uint32_t rule_count() const { return static_cast<uint32_t>(names_.size()); }
  uint32_t root() const { return root_; }

  // Whether rule r derives the empty string.
  bool nullable(uint32_t rule) const { return nullable_[rule]; }

 private:
  friend class GrammarBuilder;
  std::vector<GrammarElement> elements_;
  std::vector<CharSet> char_sets_;
  std::vector<std::vector<uint32_t>> alternatives_;
  std::vector<std::string> names_;
  std::vector<bool> nullable_;
  uint32_t root_ = 0;
};

// Collects rules by name, then checks and freezes them into a Grammar.
class GrammarBuilder {
 public:
  using Sequence = std::vector<GrammarElement>;

  // The id of rule `name`, declaring it (without alternatives yet) if new.
  uint32_t RuleId(const std::string& name);
  // A fresh rule for a parenthesized group or repetition ("value_3").
  uint32_t NewHelperRule(const std::string& base);
  bool Defined(uint32_t rule) const { return defined_[rule]; }
  const std::string& rule_name_for_errors(uint32_t rule) const { return names_[rule]; }
  // Gives `rule` its alternatives. An error once a limit is passed.
  Status Define(uint32_t rule, std::vector<Sequence> alternatives);
  // An element matching one code point of `set`.
  GrammarElement Chars(CharSet set);
  size_t element_count() const { return element_count_; }

  // Checks that every referenced rule is defined, that `root_name` exists
  // and that no rule is left-recursive (which a top-down matcher could not
  // expand), then lays the rules out.
  Expected<Grammar> Build(const std::string& root_name) &&;

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<CharSet> char_sets_;
  size_t element_count_ = 0;
};

}  // namespace kiln
