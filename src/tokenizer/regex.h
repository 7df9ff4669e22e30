// A compiled PCRE2 pattern for pre-tokenizer splits: Unicode classes, JIT,
// and a bounded amount of work per match.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kiln {

class Regex {
 public:
  // Compiles `pattern` (PCRE2 syntax, UTF and Unicode properties on). With
  // `literal`, the pattern is matched as plain text. Malformed UTF-8 in the
  // subject never matches and never fails.
  static Expected<Regex> Compile(std::string_view pattern, bool literal = false);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Calls `on_match(begin, end)` for each non-overlapping, non-empty match in
  // `subject`, left to right. Returns false when the match budget ran out
  // (the matches reported until then are valid; the rest were not searched).
  bool ForEachMatch(std::string_view subject, const std::function<void(size_t, size_t)>& on_match) const;

  const std::string& pattern() const { return pattern_; }
  bool literal() const { return literal_; }

 private:
  struct Compiled;
  Regex(std::shared_ptr<const Compiled> compiled, std::string pattern, bool literal);

  std::shared_ptr<const Compiled> compiled_;  // immutable, shared by copies
  std::string pattern_;
  bool literal_ = false;
};

}  // namespace kiln
