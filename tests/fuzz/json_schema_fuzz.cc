// Fuzzes JSON Schema -> GBNF (schemas arrive in requests): the bytes are a
// schema; when it converts, the grammar must parse, and a matcher runs over
// a fixed JSON text. Nothing may crash, hang or grow without bound.
#include <cstdint>
#include <memory>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_grammar.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Expected<std::string> gbnf = kiln::JsonSchemaToGbnf(text);
  if (!gbnf.ok()) return 0;
  kiln::Expected<kiln::Grammar> grammar = kiln::ParseGbnf(*gbnf);
  // The converter writes well-formed GBNF; only the grammar's own limits
  // and cycle checks may refuse it.
  Check(grammar.ok() || grammar.status().code() == kiln::StatusCode::kOutOfRange ||
        grammar.status().message().find("recursi") != std::string::npos ||
        grammar.status().message().find("never complete") != std::string::npos);
  if (!grammar.ok()) return 0;
  auto shared = std::make_shared<const kiln::Grammar>(std::move(grammar).value());
  kiln::GrammarMatcher matcher(shared);
  (void)matcher.AcceptBytes("{\"a\": [1, \"b\", {\"c\": true}], \"d\": \"2024-01-02\"}");
  (void)matcher.CanEnd();
  return 0;
}
