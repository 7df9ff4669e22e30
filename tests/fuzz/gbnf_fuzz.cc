// Fuzzes the GBNF reader (grammars arrive in requests): the bytes are parsed
// as a grammar and, when they parse, a matcher runs over a fixed text. Nothing
// may crash, hang or grow without bound.
#include <cstdint>
#include <memory>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Expected<kiln::Grammar> grammar = kiln::ParseGbnf(text);
  if (!grammar.ok()) return 0;
  auto shared = std::make_shared<const kiln::Grammar>(std::move(grammar).value());
  kiln::GrammarMatcher matcher(shared);
  for (char c : std::string_view("{\"a\": [1, 2.5, \"x\\n\"], \"b\": null} \xC3\xA9")) {
    if (!matcher.AcceptBytes(std::string_view(&c, 1))) break;
  }
  (void)matcher.CanEnd();
  return 0;
}
