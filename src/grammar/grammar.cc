// GrammarBuilder's checks (undefined rules, left recursion) and layout.
#include "grammar/grammar.h"

#include <algorithm>
#include <unordered_map>

namespace kiln {

bool CharSet::Contains(char32_t cp) const {
  // Sets are small; a linear scan beats a binary search at these sizes.
  bool inside = false;
  for (const Range& r : ranges) {
    if (cp >= r.lo && cp <= r.hi) {
      inside = true;
      break;
    }
  }
  return inside != negated;
}

bool CharSet::Intersects(char32_t lo, char32_t hi) const {
  for (const Range& r : ranges) {
    bool overlaps = r.lo <= hi && lo <= r.hi;
    bool covers = r.lo <= lo && hi <= r.hi;
    if (!negated && overlaps) return true;
    if (negated && covers) return false;  // ranges are merged, so one range covers or none does
  }
  return negated;
}

bool CharSet::ContainsAll(char32_t lo, char32_t hi) const {
  for (const Range& r : ranges) {
    if (!negated && r.lo <= lo && hi <= r.hi) return true;  // ranges are merged: one covers or none does
    if (negated && r.lo <= hi && lo <= r.hi) return false;
  }
  return negated;
}

uint32_t GrammarBuilder::RuleId(const std::string& name) {
  auto found = ids_.find(name);
  if (found != ids_.end()) return found->second;
  ids_[name] = static_cast<uint32_t>(names_.size());
  names_.push_back(name);
  defined_.push_back(false);
  rules_.emplace_back();
  return static_cast<uint32_t>(names_.size() - 1);
}

uint32_t GrammarBuilder::NewHelperRule(const std::string& base) {
  std::string name = fmt::format("{}_{}", base, names_.size());
  ids_[name] = static_cast<uint32_t>(names_.size());
  names_.push_back(name);
  defined_.push_back(false);
  rules_.emplace_back();
  return static_cast<uint32_t>(names_.size() - 1);
}

Status GrammarBuilder::Define(uint32_t rule, std::vector<Sequence> alternatives) {
  for (const Sequence& s : alternatives) element_count_ += s.size() + 1;
  if (element_count_ > kMaxGrammarElements) {
    return OutOfRange("grammar too large: more than {} elements once repetitions are expanded",
                      kMaxGrammarElements);
  }
  if (names_.size() > kMaxGrammarRules) {
    return OutOfRange("grammar too large: more than {} rules", kMaxGrammarRules);
  }
  rules_[rule] = std::move(alternatives);
  defined_[rule] = true;
  return Status::Ok();
}

GrammarElement GrammarBuilder::Chars(CharSet set) {
  std::sort(set.ranges.begin(), set.ranges.end(),
            [](const CharSet::Range& a, const CharSet::Range& b) { return a.lo < b.lo; });
  std::vector<CharSet::Range> merged;
  for (const CharSet::Range& r : set.ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  set.ranges = std::move(merged);
  char_sets_.push_back(std::move(set));
  return {GrammarElement::Kind::kChars, static_cast<uint32_t>(char_sets_.size() - 1)};
}

namespace {

using Kind = GrammarElement::Kind;

std::vector<bool> NullableRules(const std::vector<std::vector<GrammarBuilder::Sequence>>& rules) {
  std::vector<bool> nullable(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& seq : rules[r]) {
        bool all = std::all_of(seq.begin(), seq.end(), [&](const GrammarElement& e) {
          return e.kind == Kind::kRuleRef && nullable[e.index];
        });
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Rules that derive at least one finite string.
std::vector<bool> ProductiveRules(const std::vector<std::vector<GrammarBuilder::Sequence>>& rules) {
  std::vector<bool> productive(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (productive[r]) continue;
      for (const auto& seq : rules[r]) {
        bool all = std::all_of(seq.begin(), seq.end(), [&](const GrammarElement& e) {
          return e.kind == Kind::kChars || productive[e.index];
        });
        if (all) {
          productive[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return productive;
}

}  // namespace

Expected<Grammar> GrammarBuilder::Build(const std::string& root_name) && {
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (!defined_[r]) return InvalidArgument("rule '{}' is used but never defined", names_[r]);
  }
  auto root = std::find(names_.begin(), names_.end(), root_name);
  if (root == names_.end()) return InvalidArgument("the grammar has no rule '{}'", root_name);

  // Alternatives that need a rule which can never complete (a cycle with no
  // way out) are dropped, so that no text the matcher accepts is a trap.
  std::vector<bool> productive = ProductiveRules(rules_);
  if (!productive[root - names_.begin()]) {
    return InvalidArgument(
        "rule '{}' can never complete: every way through it needs a rule that can never "
        "complete (an endless recursion)",
        root_name);
  }
  for (auto& alternatives : rules_) {
    std::erase_if(alternatives, [&](const Sequence& seq) {
      return std::any_of(seq.begin(), seq.end(), [&](const GrammarElement& e) {
        return e.kind == Kind::kRuleRef && !productive[e.index];
      });
    });
  }
  std::vector<bool> nullable = NullableRules(rules_);

  // Rule a "starts with" rule b when b appears after only nullable rules in
  // one of a's alternatives; a cycle of those is left recursion, which a
  // top-down matcher would expand forever.
  std::vector<std::vector<uint32_t>> starts_with(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const auto& seq : rules_[r]) {
      for (const GrammarElement& e : seq) {
        if (e.kind != Kind::kRuleRef) break;
        starts_with[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  enum : uint8_t { kUnseen, kOnPath, kDone };
  std::vector<uint8_t> color(rules_.size(), kUnseen);
  for (uint32_t start = 0; start < rules_.size(); ++start) {
    if (color[start] != kUnseen) continue;
    // An explicit stack: a deep rule chain must not overflow the C++ stack.
    std::vector<std::pair<uint32_t, size_t>> path = {{start, 0}};
    color[start] = kOnPath;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == starts_with[rule].size()) {
        color[rule] = kDone;
        path.pop_back();
        continue;
      }
      uint32_t child = starts_with[rule][next++];
      if (color[child] == kOnPath) {
        return InvalidArgument(
            "rule '{}' is left-recursive (it can reach itself before matching any "
            "character), which is not supported",
            names_[child]);
      }
      if (color[child] == kUnseen) {
        color[child] = kOnPath;
        path.push_back({child, 0});
      }
    }
  }

  Grammar g;
  g.names_ = std::move(names_);
  g.char_sets_ = std::move(char_sets_);
  g.nullable_ = std::move(nullable);
  g.root_ = static_cast<uint32_t>(root - g.names_.begin());
  g.alternatives_.resize(rules_.size());
  g.elements_.reserve(element_count_);
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const auto& seq : rules_[r]) {
      g.alternatives_[r].push_back(static_cast<uint32_t>(g.elements_.size()));
      g.elements_.insert(g.elements_.end(), seq.begin(), seq.end());
      g.elements_.push_back({Kind::kEnd, 0});
    }
  }
  return g;
}

}  // namespace kiln
