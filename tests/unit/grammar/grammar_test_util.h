// Helpers shared by the grammar tests: parse-or-fail and whole-string matching.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"

namespace kiln::testing {

inline std::shared_ptr<const Grammar> ParseOrDie(std::string_view gbnf) {
  Expected<Grammar> g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << gbnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

// Whether the grammar accepts exactly `text` (as one complete sentence).
inline bool Matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  GrammarMatcher m(grammar);
  return m.AcceptBytes(text) && m.CanEnd();
}

// Whether `text` is a prefix of some sentence.
inline bool IsPrefix(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  GrammarMatcher m(grammar);
  return m.AcceptBytes(text);
}

}  // namespace kiln::testing
